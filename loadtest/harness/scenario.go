package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// startScenario brings up a run of a scenario other than the k6 sale
// (invented-skus, lifecycle): its results and work directories, its
// private dependencies and the service instances. The caller defers
// tearDown at once, whatever the error: what was started is stopped.
func startScenario(ctx context.Context, base Config, name string, client *http.Client) (*run, error) {
	r := &run{cfg: base, log: base.Log, client: client}
	if r.log == nil {
		r.log = io.Discard
	}
	r.id = time.Now().Format("20060102-150405") + "-" + name
	r.dir = filepath.Join(base.ResultsDir, r.id)
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return r, err
	}
	var err error
	if r.work, err = os.MkdirTemp("", "seckill-"+name+"-"); err != nil {
		return r, err
	}
	return r, r.bringUp(ctx)
}

// tearDown stops what the run started and drops its database.
func (r *run) tearDown() {
	r.ps.stopAll(15 * time.Second)
	if r.db != nil {
		if r.dbName != "" && !r.cfg.Keep {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			if _, err := r.db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+r.dbName); err != nil {
				fmt.Fprintf(r.log, "warning: drop database %s: %v\n", r.dbName, err)
			}
			cancel()
		}
		r.db.Close()
	}
	r.myfail.stop()
	if !r.cfg.Keep {
		os.RemoveAll(r.work)
	}
}
