package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/toolchain"
)

// buildRef builds the service of a git ref (git archive into dir, then go
// build there), so that one run can measure it next to the worktree's:
// an A/B of a code change on the same machine, minutes apart. The
// repository itself is only read.
func buildRef(ctx context.Context, root, ref, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	name := strings.NewReplacer("/", "_", ":", "_", "~", "_", "^", "_").Replace(ref)
	src := filepath.Join(dir, "src-"+name)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, ref, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %w\n%s", ref, err, out)
	}
	bin := filepath.Join(dir, "seckill-"+name)
	if err := toolchain.Build(ctx, src, "./cmd/seckill", bin); err != nil {
		return "", fmt.Errorf("%s: %w", ref, err)
	}
	return bin, nil
}
