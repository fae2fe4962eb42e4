package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// profiler fetches the service's CPU and allocation profiles over a row's
// run (-profile), and its memory statistics halfway through it:
// net/http/pprof on the instance's debug address. Read the profiles with
// `go tool pprof -top <bin> <file>`; the statistics (the runtime.MemStats
// at the end of the text heap profile: StackInuse, HeapInuse, Sys) say
// where a row's resident memory goes, and the goroutines where its
// requests wait. Sampling costs the service a little
// CPU, so the CPU table of a profiled run reads a bit high.
type profiler struct {
	wg   sync.WaitGroup
	errs []error
	mu   sync.Mutex
}

// start fetches, in the background, into dir, both profiles for d as
// <prefix>-cpu.pprof and <prefix>-allocs.pprof (the allocations made
// during d), and at d/2 the text heap profile as <prefix>-heap.txt and
// the goroutines, grouped by stack, as <prefix>-goroutines.txt (where
// requests in flight wait).
func (p *profiler) start(ctx context.Context, debugBase, dir, prefix string, d time.Duration) {
	secs := max(int(d.Seconds()), 1)
	for _, prof := range []struct {
		path, file string
		after      time.Duration
	}{
		{fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), prefix + "-cpu.pprof", 0},
		{fmt.Sprintf("/debug/pprof/allocs?seconds=%d", secs), prefix + "-allocs.pprof", 0},
		{"/debug/pprof/heap?debug=1", prefix + "-heap.txt", d / 2},
		{"/debug/pprof/goroutine?debug=1", prefix + "-goroutines.txt", d / 2},
	} {
		p.wg.Go(func() {
			t := time.NewTimer(prof.after)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			if err := fetchTo(ctx, debugBase+prof.path, filepath.Join(dir, prof.file), d+30*time.Second); err != nil {
				p.mu.Lock()
				p.errs = append(p.errs, err)
				p.mu.Unlock()
			}
		})
	}
}

// wait returns once every profile is written, with what failed.
func (p *profiler) wait() []error {
	p.wg.Wait()
	return p.errs
}

// fetchTo writes what GET url answers to file, within timeout.
func fetchTo(ctx context.Context, url, file string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
