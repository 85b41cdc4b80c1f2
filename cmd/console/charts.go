package console

import (
	"fmt"
	"strings"
	"time"

	"github.com/personaq/personaq/retry"
)

// Charts are plain data a template draws as inline SVG (no script, no
// library): coordinates are computed here, the markup is in the templates.

// barChart is a small column chart: one column per minute.
type barChart struct {
	W, H  float64
	Label string
	Bars  []bar
	Max   int
}

type bar struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

const (
	sparkW = 180.0
	sparkH = 28.0
)

// outcomeChart stacks stopped requests on succeeded ones, per minute.
func outcomeChart(series []minute, label string) barChart {
	return columns(series, label, func(m minute) []part {
		return []part{{m.ok, "ok", "succeeded"}, {m.stopped, "bad", "stopped"}}
	})
}

// retryChart shows retried attempts per minute.
func retryChart(series []minute, label string) barChart {
	return columns(series, label, func(m minute) []part { return []part{{m.retries, "warn", "retries"}} })
}

type part struct {
	n     int
	class string
	what  string
}

func columns(series []minute, label string, parts func(minute) []part) barChart {
	c := barChart{W: sparkW, H: sparkH, Label: label}
	for _, m := range series {
		t := 0
		for _, p := range parts(m) {
			t += p.n
		}
		c.Max = max(c.Max, t)
	}
	if c.Max == 0 || len(series) == 0 {
		return c
	}
	w := sparkW / float64(len(series))
	for i, m := range series {
		y := sparkH
		ago := len(series) - 1 - i
		for _, p := range parts(m) {
			if p.n == 0 {
				continue
			}
			h := max(sparkH*float64(p.n)/float64(c.Max), 1)
			y -= h
			c.Bars = append(c.Bars, bar{X: float64(i) * w, Y: y, W: max(w-0.5, 0.5), H: h, Class: p.class,
				Title: fmt.Sprintf("%d %s, %d min ago", p.n, p.what, ago)})
		}
	}
	return c
}

// progressChart draws tasks completed per attempt: a flat run is a plateau.
type progressChart struct {
	W, H    float64
	Total   int
	Line    string
	Points  []point
	YTicks  []tick
	Plateau *band
}

type point struct {
	X, Y  float64
	Class string
	Title string
	Label string
}

type tick struct {
	X, Y  float64
	Label string
}

// band marks a plateau: attempts with the same progress in a row.
type band struct {
	X, W, Y, Mid float64
	Text         string
}

const (
	progW, progH     = 360.0, 160.0
	progLeft, progTo = 36.0, 24.0
)

// newProgressChart returns nil when no attempt reported progress.
func newProgressChart(hist []retry.Attempt) *progressChart {
	var known []retry.Attempt
	for _, a := range hist {
		if a.Progress.Known() {
			known = append(known, a)
		}
	}
	if len(known) == 0 {
		return nil
	}
	total := known[0].Progress.Total
	for _, a := range known {
		total = max(total, a.Progress.Total, a.Progress.Completed)
	}
	c := &progressChart{W: progW, H: progH, Total: total}
	plotW, plotH := progW-progLeft-12, progH-progTo-20
	step := plotW / float64(max(len(known)-1, 1))
	var line []string
	for i, a := range known {
		x := progLeft + float64(i)*step
		if len(known) == 1 {
			x = progLeft + plotW/2
		}
		y := 12 + plotH*(1-float64(a.Progress.Completed)/float64(max(total, 1)))
		line = append(line, fmt.Sprintf("%.1f,%.1f", x, y))
		c.Points = append(c.Points, point{X: x, Y: y, Class: "agent-" + string(roleOf(a)), Label: fmt.Sprint(a.Number),
			Title: fmt.Sprintf("attempt %d, %s: %d/%d (%s)", a.Number, agentName(a), a.Progress.Completed, a.Progress.Total, a.Class)})
	}
	c.Line = strings.Join(line, " ")
	c.YTicks = []tick{{X: progLeft - 6, Y: 12 + 4, Label: fmt.Sprint(total)}, {X: progLeft - 6, Y: 12 + plotH + 4, Label: "0"}}
	c.Plateau = plateauBand(known, c.Points, step)
	return c
}

// plateauBand finds the last run of two or more attempts in a row with the
// same progress (the adaptive policy defers on three across both agents).
func plateauBand(known []retry.Attempt, pts []point, step float64) *band {
	end := len(known) - 1
	start := end
	for start > 0 && known[start-1].Progress.Completed == known[end].Progress.Completed {
		start--
	}
	if end-start < 1 {
		return nil
	}
	p := known[end].Progress
	return &band{X: pts[start].X - step/4, W: pts[end].X - pts[start].X + step/2, Y: pts[end].Y,
		Mid:  (pts[start].X + pts[end].X) / 2,
		Text: fmt.Sprintf("plateau at %d/%d over attempts %d–%d", p.Completed, p.Total, known[start].Number, known[end].Number)}
}

func roleOf(a retry.Attempt) retry.Role {
	if a.Role == "" {
		return retry.RolePrimary
	}
	return a.Role
}

func agentName(a retry.Attempt) string {
	if a.Agent != "" {
		return a.Agent
	}
	return string(roleOf(a))
}

// timeline places each attempt on a time axis: a bar for its run, a dashed
// gap for the wait before the next.
type timeline struct {
	W, H float64
	Bars []bar
	Gaps []gap
	Span string
}

type gap struct {
	X1, X2, Y float64
	Label     string
}

const (
	tlW, tlRow = 560.0, 22.0
)

func newTimeline(hist []retry.Attempt) *timeline {
	if len(hist) == 0 {
		return nil
	}
	t0 := hist[0].At
	end := t0
	for _, a := range hist {
		end = later(end, a.At.Add(a.Duration))
	}
	span := max(end.Sub(t0), time.Millisecond)
	x := func(t time.Time) float64 { return 8 + (tlW-16)*float64(t.Sub(t0))/float64(span) }
	tl := &timeline{W: tlW, H: float64(len(hist))*tlRow + 8, Span: span.Round(time.Millisecond).String()}
	for i, a := range hist {
		y := 4 + float64(i)*tlRow
		x1, x2 := x(a.At), x(a.At.Add(a.Duration))
		tl.Bars = append(tl.Bars, bar{X: x1, Y: y, W: max(x2-x1, 2), H: tlRow - 6, Class: "class-" + a.Class.String(),
			Title: fmt.Sprintf("attempt %d, %s, %s, %s", a.Number, agentName(a), a.Class, a.Duration.Round(time.Millisecond))})
		if i+1 < len(hist) {
			next := hist[i+1].At
			tl.Gaps = append(tl.Gaps, gap{X1: x2, X2: max(x(next), x2), Y: y + (tlRow-6)/2,
				Label: "wait " + max(next.Sub(a.At.Add(a.Duration)), 0).Round(time.Millisecond).String()})
		}
	}
	return tl
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
