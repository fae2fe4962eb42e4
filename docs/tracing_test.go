package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/config"
)

// TestConfigurationNamesEveryTracingVariable: every OTEL_* variable the
// service reads itself is in docs/configuration.md's Traces section.
func TestConfigurationNamesEveryTracingVariable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## Traces")
	if start < 0 {
		t.Fatal("docs/configuration.md has no Traces section")
	}
	section := doc[start:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	for _, v := range config.TracingVariables {
		if !strings.Contains(section, "`"+v+"`") {
			t.Errorf("docs/configuration.md, Traces: %s is read by the service (config.TracingVariables) but not named", v)
		}
	}
}
