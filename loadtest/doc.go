// Package loadtest holds the flash-sale load test: the k6 script
// (sale.js), the runner behind `make loadtest` (cmd/loadtest, harness) and
// the oversell verifier (verify). Its test runs the short smoke sale that
// proves "no oversell" on every change; see README.md.
package loadtest
