// Package docs holds the project's documentation (README.md and the pages
// in this directory). Its tests keep the pages honest: every relative link
// and anchor resolves inside the repository, and README.md stays short
// enough to read as a front door.
package docs
