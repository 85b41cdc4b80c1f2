package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// page is what every template gets: the layout's fields and the page's own
// data in Data.
type page struct {
	Title    string
	Nav      string
	CSRF     string
	LoggedIn bool
	ReadOnly bool
	Data     any
}

// templates holds one parsed set per page, each the layout plus the page.
type templates map[string]*template.Template

var funcs = template.FuncMap{
	"ago":      ago,
	"ms":       func(v int64) string { return (time.Duration(v) * time.Millisecond).String() },
	"dur":      func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"clock":    func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"rfc3339":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"trunc":    trunc,
	"add":      func(a, b int) int { return a + b },
	"join":     strings.Join,
	"pct":      func(done, total int) int { return pct(done, total) },
	"fmtFloat": func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"usd":      usd,
}

// usd is a dollar amount without the float noise of a sum (0.018, not
// 0.018000000000000002).
func usd(v float64) string { return "$" + strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64) }

func parseTemplates() (templates, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html")
	if err != nil {
		return nil, fmt.Errorf("console templates: %w", err)
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console templates: %w", err)
	}
	out := templates{}
	for _, n := range names {
		if n == "templates/layout.html" || n == "templates/partials.html" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, fmt.Errorf("console templates: %w", err)
		}
		out[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	return out, nil
}

// render executes a page into a buffer first, so a template error is a 500
// and not half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.CSRF, p.LoggedIn, p.ReadOnly = csrfFrom(r.Context()), s.auth.loggedIn(r), s.cfg.ReadOnly
	t, ok := s.tmpl[name]
	var buf bytes.Buffer
	err := fmt.Errorf("no template %q", name)
	if ok {
		entry := "layout"
		if strings.HasPrefix(name, "frag_") {
			entry = "content"
		}
		err = t.ExecuteTemplate(&buf, entry, p)
	}
	if err != nil {
		s.log.Error().Err(err).Str("page", name).Msg("console: render failed")
		http.Error(w, "render failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders the error page with status.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	if status >= 500 {
		s.log.Warn().Err(err).Str("path", r.URL.Path).Msg("console: request failed")
	}
	s.render(w, r, status, "error", page{Title: http.StatusText(status), Data: errorView{Status: status, Message: err.Error()}})
}

type errorView struct {
	Status  int
	Message string
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

func trunc(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func pct(done, total int) int {
	if total <= 0 {
		return 100
	}
	return done * 100 / total
}
