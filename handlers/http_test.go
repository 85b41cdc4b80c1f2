package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// testRequest is attempt 2 (the fallback agent) of a step with history.
func testRequest() *Request {
	return &Request{
		Message: &schemas.PersonaRequest{
			SchemaVersion: schemas.Version, RequestID: "req-1", TaskID: "task-7", Step: "plan",
			Persona: "planner", Agents: schemas.Agents{Primary: "claude", Fallback: "codex"},
			Input: json.RawMessage(`{"goal":"ship"}`), ProgressTotal: 9, CorrelationID: "corr-1",
			CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		},
		Attempt: 2,
		Role:    retry.RoleFallback,
		Agent:   "codex",
		Previous: []retry.Attempt{{
			Number: 1, Role: retry.RolePrimary, Agent: "claude", Class: retry.ClassValidation,
			ErrorTypes: []string{"UnprocessableEntityError"}, Error: "summary missing",
			Feedback: "add a summary", Progress: retry.Progress{Completed: 5, Total: 9},
			Duration: 1500 * time.Millisecond, At: time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC),
		}},
		Feedback:         []string{"add a summary"},
		ProgressInterval: time.Minute,
	}
}

// newHTTPInvoker starts a test server with handler and returns an invoker
// for it; cfg's URL and Client are filled in unless set.
func newHTTPInvoker(t *testing.T, handler http.HandlerFunc, cfg HTTPConfig) *HTTPInvoker {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	if cfg.URL == "" {
		cfg.URL = srv.URL + "/persona"
	}
	if cfg.Client == nil {
		cfg.Client = srv.Client()
	}
	inv, err := NewHTTP(cfg)
	require.NoError(t, err)
	t.Cleanup(inv.CloseIdleConnections)
	return inv
}

func respond(code int, retryAfter, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

func TestHTTPInvokerAnswers(t *testing.T) {
	t.Parallel()
	const progress = `{"progress":{"completed":5,"total":9}}`
	tests := []struct {
		name       string
		cfg        HTTPConfig
		code       int
		retryAfter string
		body       string
		class      retry.Class
		types      []string
		wait       time.Duration
		feedback   string
		progress   retry.Progress
		output     string
	}{
		{name: "OKWithJSON", code: 200, body: `{"plan":["a","b"]}`, class: retry.ClassSucceeded, output: `{"plan":["a","b"]}`},
		{name: "OKWithProgress", code: 200, body: `{"plan":[],"progress":{"completed":9,"total":9}}`,
			class: retry.ClassSucceeded, progress: retry.Progress{Completed: 9, Total: 9},
			output: `{"plan":[],"progress":{"completed":9,"total":9}}`},
		{name: "OKWithText", code: 200, body: "done\n", class: retry.ClassSucceeded, output: `"done"`},
		{name: "Created", code: 201, body: `{}`, class: retry.ClassSucceeded, output: `{}`},
		{name: "NoContent", code: 204, class: retry.ClassSucceeded},
		{name: "ImpossibleProgressIgnored", code: 200, body: `{"progress":{"completed":10,"total":9}}`,
			class: retry.ClassSucceeded, output: `{"progress":{"completed":10,"total":9}}`},
		{name: "BadRequest", code: 400, body: `{"error":"bad"}`, class: retry.ClassTerminal, types: []string{"BadRequestError"},
			output: `{"error":"bad"}`},
		// The persona names its error type (matched by non-retryable lists);
		// a provider's error code is not a type name, the status names it.
		{name: "NamedTypeNested", code: 500, body: `{"error":{"type":"CommitError","message":"nothing to commit"}}`,
			class: retry.ClassRetryable, types: []string{"CommitError"}, output: `{"error":{"type":"CommitError","message":"nothing to commit"}}`},
		{name: "NamedTypeErrorType", code: 500, body: `{"error_type":"RepoDiscoveryError","error":"no repo"}`,
			class: retry.ClassRetryable, types: []string{"RepoDiscoveryError"}, output: `{"error_type":"RepoDiscoveryError","error":"no repo"}`},
		{name: "NamedTypeTopLevel", code: 409, body: `{"type":"OutputWriteError"}`,
			class: retry.ClassTerminal, types: []string{"OutputWriteError"}, output: `{"type":"OutputWriteError"}`},
		{name: "ProviderErrorCodeIsNotAType", code: 400,
			body:  `{"type":"error","error":{"type":"invalid_request_error","message":"bad prompt"}}`,
			class: retry.ClassTerminal, types: []string{"BadRequestError"},
			output: `{"type":"error","error":{"type":"invalid_request_error","message":"bad prompt"}}`},
		{name: "Unauthorized", code: 401, class: retry.ClassTerminal, types: []string{"AuthenticationError"}},
		{name: "Forbidden", code: 403, class: retry.ClassTerminal, types: []string{"PermissionDeniedError"}},
		{name: "NotFound", code: 404, class: retry.ClassTerminal, types: []string{"NotFoundError"}},
		{name: "UnprocessableTerminal", code: 422, body: "no summary", class: retry.ClassTerminal,
			types: []string{"UnprocessableEntityError"}, output: `"no summary"`},
		{name: "UnprocessableValidation", cfg: HTTPConfig{ValidationOn422: true}, code: 422, body: "no summary",
			class: retry.ClassValidation, types: []string{"UnprocessableEntityError"}, feedback: "no summary",
			output: `"no summary"`},
		{name: "OtherClientError", code: 410, class: retry.ClassTerminal, types: []string{"HTTPError"}},
		{name: "RequestTimeout", code: 408, class: retry.ClassRetryable, types: []string{"RequestTimeoutError"}},
		{name: "RateLimited", code: 429, retryAfter: "3", class: retry.ClassRetryable,
			types: []string{"RateLimitError"}, wait: 3 * time.Second},
		{name: "ServerError", code: 500, body: "<html>oops</html>", class: retry.ClassRetryable, types: []string{"InternalServerError"},
			output: `"<html>oops</html>"`},
		{name: "Unavailable", code: 503, retryAfter: "60", class: retry.ClassRetryable,
			types: []string{"InternalServerError"}, wait: time.Minute},
		{name: "Overloaded", code: 529, class: retry.ClassRetryable, types: []string{"OverloadedError"}},
		{name: "ProgressOnFailure", code: 503, body: progress, class: retry.ClassRetryable,
			types: []string{"InternalServerError"}, progress: retry.Progress{Completed: 5, Total: 9}, output: progress},
		{name: "ProgressOnValidation", cfg: HTTPConfig{ValidationOn422: true}, code: 422, body: progress,
			class: retry.ClassValidation, types: []string{"UnprocessableEntityError"}, feedback: progress,
			progress: retry.Progress{Completed: 5, Total: 9}, output: progress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv := newHTTPInvoker(t, respond(tt.code, tt.retryAfter, tt.body), tt.cfg)
			res, err := inv.Handle(t.Context(), testRequest())
			c := Classify(err)
			require.Equal(t, tt.class, c.Class, "error: %v", err)
			require.Equal(t, tt.types, c.TypeNames)
			require.Equal(t, tt.wait, c.RetryAfter)
			require.Equal(t, tt.feedback, c.Feedback)
			require.Equal(t, tt.progress, res.Progress)
			if tt.output == "" {
				require.Empty(t, res.Output)
			} else {
				require.JSONEq(t, tt.output, string(res.Output))
			}
		})
	}
}

func TestHTTPInvokerSendsEnvelopeAndHeaders(t *testing.T) {
	t.Parallel()
	got := make(chan *http.Request, 1)
	bodies := make(chan []byte, 1)
	inv := newHTTPInvoker(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	}, HTTPConfig{Headers: map[string]string{
		"Authorization":    "Bearer s3cret",
		"X-Correlation-ID": "overridden by personaq",
	}})
	deadline := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	_, err := inv.Handle(ctx, testRequest())
	require.NoError(t, err)

	r := <-got
	require.Equal(t, http.MethodPost, r.Method)
	require.Equal(t, "/persona", r.URL.Path)
	wantHeaders := map[string]string{
		"Content-Type":       "application/json",
		"Authorization":      "Bearer s3cret",
		"X-Correlation-Id":   "corr-1",
		"Idempotency-Key":    "task-7/plan/2",
		"X-Personaq-Attempt": "2",
		"X-Personaq-Agent":   "codex",

		"X-Personaq-Progress-Interval-Ms": "60000",
	}
	for k, v := range wantHeaders {
		require.Equal(t, v, r.Header.Get(k), "header %s", k)
	}

	var env Envelope
	require.NoError(t, json.Unmarshal(<-bodies, &env))
	want := Envelope{
		Request: testRequest().Message, Attempt: 2, Role: retry.RoleFallback, Agent: "codex",
		Feedback: []string{"add a summary"},
		PreviousErrors: []schemas.AttemptRecord{{
			Attempt: 1, Agent: "claude", Class: "validation", ErrorType: "UnprocessableEntityError",
			Error: "summary missing", Progress: &schemas.Progress{Completed: 5, Total: 9},
			DurationMs: 1500, At: time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC),
		}},
		ProgressIntervalMs: 60000,
	}
	require.Empty(t, cmp.Diff(want, env))
}

func TestHTTPInvokerCorrelationFallsBackToRequestID(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	inv := newHTTPInvoker(t, func(_ http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("X-Correlation-ID")
	}, HTTPConfig{})
	req := testRequest()
	req.Message.CorrelationID = ""
	_, err := inv.Handle(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, "req-1", <-got)
}

func TestNewEnvelopeFirstAttemptHasEmptyLists(t *testing.T) {
	t.Parallel()
	req := testRequest()
	req.Previous, req.Feedback = nil, nil
	b, err := json.Marshal(NewEnvelope(req))
	require.NoError(t, err)
	require.Contains(t, string(b), `"feedback":[]`)
	require.Contains(t, string(b), `"previous_errors":[]`)
}

// hangUp accepts the request, then drops the connection without an
// answer; reset makes the drop an RST.
func hangUp(reset bool) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		if reset {
			_ = conn.(*net.TCPConn).SetLinger(0)
		}
		_ = conn.Close()
	}
}

func TestHTTPInvokerTransportFailures(t *testing.T) {
	t.Parallel()
	refused := "http://" + refusedAddr(t) + "/persona"
	dnsClient := &http.Client{Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			return nil, &net.DNSError{Err: "no such host", Name: "agent.invalid", IsNotFound: true}
		},
	}}
	t.Cleanup(dnsClient.CloseIdleConnections)
	tests := []struct {
		name    string
		handler http.HandlerFunc
		cfg     HTTPConfig
		class   retry.Class
	}{
		{"ConnectionRefused", respond(200, "", ""), HTTPConfig{URL: refused}, retry.ClassNetwork},
		{"DNSFailure", respond(200, "", ""), HTTPConfig{URL: "http://agent.invalid/", Client: dnsClient}, retry.ClassNetwork},
		{"ConnectionReset", hangUp(true), HTTPConfig{}, retry.ClassNetwork},
		{"HungUp", hangUp(false), HTTPConfig{}, retry.ClassNetwork},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv := newHTTPInvoker(t, tt.handler, tt.cfg)
			_, err := inv.Handle(t.Context(), testRequest())
			require.Error(t, err)
			require.Equal(t, tt.class, Classify(err).Class, "error: %v", err)
		})
	}
}

// blockUntilGone answers nothing until the client goes away, and says when
// a request has arrived. It reads the body first: the server only notices a
// client leaving once the body has been consumed.
func blockUntilGone(arrived chan<- struct{}) http.HandlerFunc {
	return func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		<-r.Context().Done()
	}
}

func TestHTTPInvokerDeadlines(t *testing.T) {
	t.Parallel()
	errShutdown := errors.New("shutting down")
	tests := []struct {
		name   string
		cancel func(context.CancelCauseFunc) // called once the request arrived
		client func(*http.Client)
		class  retry.Class
		is     error
	}{
		{name: "AttemptDeadline", cancel: func(c context.CancelCauseFunc) { c(context.DeadlineExceeded) },
			class: retry.ClassTimeout, is: context.DeadlineExceeded},
		{name: "ClientTimeout", client: func(c *http.Client) { c.Timeout = 50 * time.Millisecond },
			class: retry.ClassTimeout},
		{name: "ShutdownIsNotATimeout", cancel: func(c context.CancelCauseFunc) { c(errShutdown) },
			class: retry.ClassRetryable, is: errShutdown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			arrived := make(chan struct{}, 1)
			srv := httptest.NewServer(blockUntilGone(arrived))
			t.Cleanup(srv.Close)
			client := srv.Client()
			if tt.client != nil {
				client = &http.Client{Transport: srv.Client().Transport}
				tt.client(client)
			}
			inv, err := NewHTTP(HTTPConfig{URL: srv.URL, Client: client})
			require.NoError(t, err)

			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			if tt.cancel != nil {
				go func() {
					<-arrived
					tt.cancel(cancel)
				}()
			}
			_, err = inv.Handle(ctx, testRequest())
			require.Error(t, err)
			require.Equal(t, tt.class, Classify(err).Class, "error: %v", err)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
		})
	}
}

func TestHTTPInvokerRealDeadline(t *testing.T) {
	t.Parallel()
	inv := newHTTPInvoker(t, blockUntilGone(make(chan struct{}, 1)), HTTPConfig{})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := inv.Handle(ctx, testRequest())
	require.Equal(t, retry.ClassTimeout, Classify(err).Class, "error: %v", err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestHTTPInvokerResponseLimit(t *testing.T) {
	t.Parallel()
	const limit = 16
	tests := []struct {
		name  string
		code  int
		body  string
		class retry.Class
		isBig bool
	}{
		{"AtLimit", 200, strings.Repeat("x", limit), retry.ClassSucceeded, false},
		{"OverLimit", 200, strings.Repeat("x", limit+1), retry.ClassTerminal, true},
		{"FailureStatusWins", 503, strings.Repeat("x", 10*limit), retry.ClassRetryable, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv := newHTTPInvoker(t, respond(tt.code, "", tt.body), HTTPConfig{MaxResponseBytes: limit})
			_, err := inv.Handle(t.Context(), testRequest())
			require.Equal(t, tt.class, Classify(err).Class, "error: %v", err)
			require.Equal(t, tt.isBig, errors.Is(err, ErrResponseTooLarge))
			var se *StatusError
			if errors.As(err, &se) {
				require.LessOrEqual(t, len(se.Body), limit+len("…"))
			}
		})
	}
}

// TestHTTPInvokerReusesConnections shows bodies are drained and closed:
// otherwise every call would need a new connection.
func TestHTTPInvokerReusesConnections(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(respond(500, "", strings.Repeat("x", 4096)))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	inv, err := NewHTTP(HTTPConfig{URL: srv.URL, Client: srv.Client(), MaxResponseBytes: 100})
	require.NoError(t, err)
	for range 3 {
		_, err := inv.Handle(t.Context(), testRequest())
		require.Equal(t, retry.ClassRetryable, Classify(err).Class)
	}
	require.Equal(t, int32(1), conns.Load())
}

func TestHTTPInvokerUntrustedCertificateIsTerminal(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(respond(200, "", "{}"))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake is expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	inv, err := NewHTTP(HTTPConfig{URL: srv.URL, Client: client})
	require.NoError(t, err)
	_, err = inv.Handle(t.Context(), testRequest())
	require.Equal(t, retry.ClassTerminal, Classify(err).Class, "error: %v", err)
}

func TestHTTPInvokerDefaultClient(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(respond(200, "", `{"ok":true}`))
	t.Cleanup(srv.Close)
	inv, err := NewHTTP(HTTPConfig{URL: srv.URL})
	require.NoError(t, err)
	t.Cleanup(inv.CloseIdleConnections)
	res, err := inv.Handle(t.Context(), testRequest())
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true}`, string(res.Output))
	require.Equal(t, int64(DefaultMaxResponseBytes), inv.cfg.MaxResponseBytes)
}

func TestNewHTTPRejectsBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cfg   HTTPConfig
		field string
	}{
		{"NoURL", HTTPConfig{}, "url: required"},
		{"RelativeURL", HTTPConfig{URL: "/persona"}, "url: want an absolute http(s) URL"},
		{"OtherScheme", HTTPConfig{URL: "ftp://agent/persona"}, "url: want an absolute http(s) URL"},
		{"Unparsable", HTTPConfig{URL: "http://a b/"}, "url: "},
		{"PortOutOfRange", HTTPConfig{URL: "http://agent:99999/"}, "url: port must be 1 to 65535, got 99999"},
		{"PortZero", HTTPConfig{URL: "http://agent:0/"}, "url: port must be 1 to 65535, got 0"},
		{"NegativeLimit", HTTPConfig{URL: "http://agent/", MaxResponseBytes: -1}, "max_response_bytes: must not be negative"},
		{"HeaderNameWithSpace", HTTPConfig{URL: "http://agent/", Headers: map[string]string{"X Key": "v"}},
			`headers: "X Key": invalid name or value`},
		{"HeaderValueWithNewline", HTTPConfig{URL: "http://agent/", Headers: map[string]string{"Authorization": "a\r\nb"}},
			`headers: "Authorization": invalid name or value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewHTTP(tt.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.ErrorContains(t, err, "invalid config: "+tt.field)
		})
	}
}

// Answers of 8 MiB pass when the limit is raised to it; the answer of a
// failed attempt is kept too.
func TestHTTPInvokerEightMiBAnswer(t *testing.T) {
	t.Parallel()
	const size = 8 << 20
	body := `{"patch":"` + strings.Repeat("x", size-len(`{"patch":""}`)) + `"}`
	inv := newHTTPInvoker(t, respond(200, "", body), HTTPConfig{MaxResponseBytes: size})
	res, err := inv.Handle(t.Context(), testRequest())
	require.NoError(t, err)
	require.Len(t, res.Output, size)

	inv = newHTTPInvoker(t, respond(503, "", body), HTTPConfig{MaxResponseBytes: size})
	res, err = inv.Handle(t.Context(), testRequest())
	require.Equal(t, retry.ClassRetryable, Classify(err).Class)
	require.Len(t, res.Output, size)
}
