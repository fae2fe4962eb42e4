package harness

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// The chart's drawing area, in SVG units.
const (
	chartW, chartH = 720.0, 260.0
	chartPad       = 40.0
)

var reportTmpl = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>seckill load test {{.S.Run}}: {{if .S.Pass}}PASS{{else}}FAIL{{end}}</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:60em;color:#222;padding:0 1em}
.verdict{padding:.8em 1.2em;border-radius:6px;font-size:1.3em;font-weight:600;color:#fff}
.pass{background:#1b7f3b}.fail{background:#b3261e}
code{background:#f3f3f3;padding:0 .3em}
svg text{font:11px system-ui,sans-serif;fill:#555}
li.v{color:#b3261e}pre{background:#f6f6f6;padding:1em;overflow-x:auto}
</style></head><body>
<h1>seckill load test <code>{{.S.Run}}</code></h1>
<div class="verdict {{if .S.Pass}}pass{{else}}fail{{end}}">{{if .S.Pass}}PASS: no oversell, nothing lost or doubled; every invariant holds{{else}}FAIL: {{len .S.Violations}} violation(s){{end}}</div>
{{if .S.Violations}}<ul>{{range .S.Violations}}<li class="v"><code>{{.Name}}</code>: {{.Message}}</li>{{end}}</ul>{{end}}

<h2>Units sold over time</h2>
<svg viewBox="0 0 {{.W}} {{.H}}" width="100%" role="img" aria-label="units sold over time">
{{if .Fault}}<rect x="{{.FaultX}}" y="{{.Pad}}" width="{{.FaultW}}" height="{{.PlotH}}" fill="#fbe3e1"/>
<text x="{{.FaultX}}" y="{{.Pad}}" dy="-4">{{.S.Fault}} down</text>{{end}}
<line x1="{{.Pad}}" y1="{{.StockY}}" x2="{{.Right}}" y2="{{.StockY}}" stroke="#999" stroke-dasharray="4 3"/>
<text x="{{.Pad}}" y="{{.StockY}}" dy="-4">stock {{.S.Stock}}</text>
<polyline points="{{.Points}}" fill="none" stroke="#1f5fbf" stroke-width="2"/>
<line x1="{{.Pad}}" y1="{{.Bottom}}" x2="{{.Right}}" y2="{{.Bottom}}" stroke="#333"/>
<line x1="{{.Pad}}" y1="{{.Pad}}" x2="{{.Pad}}" y2="{{.Bottom}}" stroke="#333"/>
{{range .Ticks}}<text x="{{.X}}" y="{{$.Bottom}}" dy="14" text-anchor="middle">{{.Label}}</text>{{end}}
<text x="{{.Right}}" y="{{.Bottom}}" dy="28" text-anchor="end">seconds since k6 started</text>
</svg>

<h2>The sale</h2>
<pre>{{.Text}}</pre>
{{with .S.History}}{{if .Visualization}}<p>The history's search: <a href="{{.Visualization}}">Porcupine visualization</a>.</p>{{end}}{{end}}
<p>Request rates and latencies over time: <a href="report.html">k6 report</a>. Numbers: <a href="summary.json">summary.json</a>, <a href="k6-summary.json">k6-summary.json</a>.</p>

<h2>Timeline</h2>
<ul>{{range .S.Events}}<li><code>{{.}}</code></li>{{end}}</ul>
</body></html>
`))

type tick struct {
	X     float64
	Label string
}

// writeHTML renders the summary as a self-contained page: the verdict, the
// sold-over-time chart with the fault window, the text summary.
func (s Summary) writeHTML(w io.Writer) error {
	var text strings.Builder
	s.WriteText(&text, "")
	end := 1.0
	for _, x := range s.Progress {
		end = max(end, x.At)
	}
	end = max(end, s.FaultBack)
	plotW, plotH := chartW-2*chartPad, chartH-2*chartPad
	xOf := func(t float64) float64 { return chartPad + t/end*plotW }
	yOf := func(sold int64) float64 {
		if s.Stock == 0 {
			return chartH - chartPad
		}
		return chartH - chartPad - float64(sold)/float64(s.Stock)*plotH
	}
	var pts strings.Builder
	for _, x := range s.Progress {
		fmt.Fprintf(&pts, "%.1f,%.1f ", xOf(x.At), yOf(x.Sold))
	}
	var ticks []tick
	step := max(1, int(end/8))
	for t := 0; float64(t) <= end; t += step {
		ticks = append(ticks, tick{X: xOf(float64(t)), Label: fmt.Sprint(t)})
	}
	data := map[string]any{
		"S": s, "W": chartW, "H": chartH, "Pad": chartPad, "PlotH": plotH,
		"Right": chartW - chartPad, "Bottom": chartH - chartPad, "StockY": yOf(s.Stock),
		"Points": strings.TrimSpace(pts.String()), "Ticks": ticks,
		"Fault":  s.Fault != FaultNone && s.FaultStart > 0,
		"FaultX": xOf(s.FaultStart), "FaultW": max(1, xOf(s.FaultBack)-xOf(s.FaultStart)), "Text": text.String(),
	}
	return reportTmpl.Execute(w, data)
}

// saveMetrics keeps every live instance's /metrics as the sale left them
// (metrics-instance-N.txt in the results): the lock's acquire times and
// attempts, the batch sizes and commit times that explain a verdict.
func (r *run) saveMetrics(ctx context.Context) {
	for i, base := range r.baseURLs {
		if i < len(r.instances) && !r.instances[i].Alive() {
			continue
		}
		p, err := r.send(ctx, http.MethodGet, base+"/metrics", "", "", "")
		if err == nil {
			err = os.WriteFile(filepath.Join(r.dir, fmt.Sprintf("metrics-instance-%d.txt", i)), p.body, 0o644)
		}
		if err != nil {
			fmt.Fprintf(r.log, "warning: instance-%d /metrics: %v\n", i, err)
		}
	}
}
