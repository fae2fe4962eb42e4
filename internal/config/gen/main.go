// Command gen rewrites the settings table of a Markdown file (between its
// settings markers) from the Config's tags: go generate ./internal/config.
package main

import (
	"fmt"
	"os"

	"github.com/seckill/seckill/internal/config"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen file.md")
		os.Exit(2)
	}
	if err := rewrite(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func rewrite(path string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := config.WithSettingsTable(string(doc))
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(out), 0o644)
}
