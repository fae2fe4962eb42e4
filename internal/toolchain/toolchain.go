// Package toolchain finds and builds what the load test and the bench
// run: k6 (installed with go install when missing), the module's root and
// its binaries.
package toolchain

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// K6Version is the k6 the runner installs when none is found.
const K6Version = "v1.8.1"

// FindK6 returns the k6 binary: explicit if set, else k6 on PATH, else
// $(go env GOPATH)/bin/k6.
func FindK6(explicit string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("k6: %w", err)
		}
		return explicit, nil
	}
	if p, err := exec.LookPath("k6"); err == nil {
		return p, nil
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(dir, "bin", "k6")
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("k6 not found on PATH nor in $(go env GOPATH)/bin: install it with `go install go.k6.io/k6@%s`", K6Version)
}

// EnsureK6 finds k6, or installs it with go install (bounded by ctx).
func EnsureK6(ctx context.Context, explicit string, log io.Writer) (string, error) {
	if p, err := FindK6(explicit); err == nil || explicit != "" {
		return p, err
	}
	fmt.Fprintf(log, "k6 not found: go install go.k6.io/k6@%s (a few minutes the first time)\n", K6Version)
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", "go.k6.io/k6@"+K6Version)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("install k6: %w", err)
	}
	return FindK6("")
}

// ModuleRoot is the directory of the go.mod enclosing dir.
func ModuleRoot(dir string) (string, error) {
	cmd := exec.Command("go", "env", "GOMOD")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("%s is not inside the seckill module", dir)
	}
	return filepath.Dir(mod), nil
}

// BuildService compiles cmd/seckill into dir.
func BuildService(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "seckill")
	return bin, Build(ctx, root, "./cmd/seckill", bin)
}

// Build compiles the package pkg of the module at root into bin.
func Build(ctx context.Context, root, pkg, bin string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return nil
}
