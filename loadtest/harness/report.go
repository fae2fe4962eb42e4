package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// writeResults writes summary.json and summary.txt (the text printed,
// then the timeline) and points results/latest at the run.
func (r *run) writeResults(s Summary) error {
	raw, err := json.MarshalIndent(s, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(r.dir, "summary.json"), append(raw, '\n'), 0o644)
	}
	var text strings.Builder
	s.WriteText(&text, "")
	text.WriteString("\ntimeline (seconds since k6 started)\n  " + strings.Join(s.Events, "\n  ") + "\n")
	if err == nil {
		err = os.WriteFile(filepath.Join(r.dir, "summary.txt"), []byte(text.String()), 0o644)
	}
	if err != nil {
		return err
	}
	latest := filepath.Join(filepath.Dir(r.dir), "latest")
	_ = os.Remove(latest) // absent the first time
	return os.Symlink(filepath.Base(r.dir), latest)
}

// saveMetrics keeps every live instance's /metrics as the sale left them
// (metrics-instance-N.txt): what explains a verdict.
func (r *run) saveMetrics(ctx context.Context) {
	for i, base := range r.baseURLs {
		if i < len(r.instances) && !r.instances[i].Alive() {
			continue
		}
		p, err := r.send(ctx, http.MethodGet, base+"/metrics", "", "")
		if err == nil {
			err = os.WriteFile(filepath.Join(r.dir, fmt.Sprintf("metrics-instance-%d.txt", i)), p.body, 0o644)
		}
		if err != nil {
			fmt.Fprintf(r.log, "warning: instance-%d /metrics: %v\n", i, err)
		}
	}
}
