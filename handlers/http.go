package handlers

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// DefaultMaxResponseBytes bounds a persona's answer (HTTP body or command
// stdout) unless configured otherwise.
const DefaultMaxResponseBytes = 1 << 20

// maxDrain is how much of an unread response body is discarded so the
// connection can be reused; past it, closing is cheaper than reading.
const maxDrain = 64 << 10

// HTTPConfig configures an HTTPInvoker.
type HTTPConfig struct {
	// URL is the persona endpoint each attempt is POSTed to. Required.
	URL string
	// Client sends the requests. Default: a client with its own transport
	// and no overall timeout (the attempt's context bounds each call).
	Client *http.Client
	// Headers are set on every request (e.g. Authorization). personaq's own
	// headers (Content-Type, X-Correlation-ID, Idempotency-Key,
	// X-Personaq-*, and the attempt's W3C traceparent/tracestate) take
	// precedence.
	Headers map[string]string
	// MaxResponseBytes bounds a response body; a 2xx answer longer than
	// this fails as terminal (ErrResponseTooLarge). Default: 1 MiB; raise it
	// for personas whose answers are larger (8 MiB is 8388608).
	MaxResponseBytes int64
	// ValidationOn422 turns a 422 with a body into a validation failure
	// whose body is fed back to the next attempt. Default: false.
	ValidationOn422 bool
}

func (c HTTPConfig) withDefaults() HTTPConfig {
	c.Headers = maps.Clone(c.Headers) // the caller may keep editing theirs
	if c.Client == nil {
		c.Client = defaultClient()
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	return c
}

func (c HTTPConfig) validate() error {
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		return configErr("url", "required")
	case err != nil:
		return configErr("url", "%v", err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return configErr("url", "want an absolute http(s) URL, got %q", c.URL)
	case !ValidPort(u.Port()):
		return configErr("url", "port must be 1 to 65535, got %s", u.Port())
	case c.MaxResponseBytes < 0:
		return configErr("max_response_bytes", "must not be negative, got %d", c.MaxResponseBytes)
	}
	for name, value := range c.Headers {
		if !validHeader(name, value) {
			// Never echo the value: it is often a credential.
			return configErr("headers", "%q: invalid name or value", name)
		}
	}
	return nil
}

// ValidPort reports whether port, the port of a URL (url.URL.Port), is
// empty or a number from 1 to 65535: url.Parse accepts any digits.
func ValidPort(port string) bool {
	if port == "" {
		return true
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

// validHeader checks what net/http would otherwise reject on every call,
// turning a bad header into a start-up error instead of retried failures.
func validHeader(name, value string) bool {
	if name == "" || strings.ContainsAny(value, "\r\n\x00") {
		return false
	}
	for _, r := range name {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// defaultClient has no Client.Timeout on purpose: one fixed timeout would
// fight the per-persona attempt timeouts carried by the context.
func defaultClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Many workers call the same persona host; Go's default of 2 idle
	// connections per host would make most calls dial afresh.
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t}
}

// HTTPInvoker runs a persona by POSTing each attempt's Envelope to its URL.
//
// A 2xx answer succeeds; other statuses are classified by
// StatusOptions.FromStatus, and a JSON body may name its error type
// ({"error":{"type":"CommitError"}}, see StatusError.Type). The body is
// kept as Result.Output and progress ({"progress":{"completed":5,"total":9}})
// is read from any answer, failures included, so plateaus can be detected
// and the next attempt can be shown what was wrong. Usage is read from any
// answer too: a "personaq_usage" object, or a model API's "usage" object
// (prompt_tokens/completion_tokens or input_tokens/output_tokens, with an
// optional cost_usd). A deadline becomes
// Timeout; refused, reset and unresolvable connections become Network.
type HTTPInvoker struct {
	cfg    HTTPConfig
	status StatusOptions
}

// NewHTTP validates cfg and returns an invoker.
func NewHTTP(cfg HTTPConfig) (*HTTPInvoker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &HTTPInvoker{cfg: cfg, status: StatusOptions{ValidationOn422: cfg.ValidationOn422}}, nil
}

// CloseIdleConnections releases the client's idle keep-alive connections.
func (h *HTTPInvoker) CloseIdleConnections() { h.cfg.Client.CloseIdleConnections() }

// Handle implements Handler.
func (h *HTTPInvoker) Handle(ctx context.Context, req *Request) (Result, error) {
	hreq, err := h.newRequest(ctx, req)
	if err != nil {
		return Result{}, Terminal(err)
	}
	resp, err := h.cfg.Client.Do(hreq)
	if err != nil {
		return Result{}, transportError(ctx, err)
	}
	defer drainClose(resp.Body)
	return h.answer(ctx, resp)
}

func (h *HTTPInvoker) newRequest(ctx context.Context, req *Request) (*http.Request, error) {
	body, err := json.Marshal(NewEnvelope(req))
	if err != nil {
		return nil, fmt.Errorf("encode persona request: %w", err)
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build persona request: %w", err)
	}
	for k, v := range h.cfg.Headers {
		r.Header.Set(k, v)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json")
	r.Header.Set(schemas.PersonaHeaderCorrelationID, correlationID(req.Message))
	// net/http also treats a request with Idempotency-Key as safe to resend
	// on a dead keep-alive connection, which is what we want.
	r.Header.Set(schemas.PersonaHeaderIdempotencyKey, idempotencyKey(req))
	r.Header.Set(schemas.PersonaHeaderAttempt, strconv.Itoa(req.Attempt))
	r.Header.Set(schemas.PersonaHeaderAgent, req.Agent)
	injectTrace(ctx, r.Header)
	if req.LeaseDeadline != nil {
		if d := req.LeaseDeadline(); !d.IsZero() {
			// Past it another replica may run the request: a persona server
			// can stop by itself.
			r.Header.Set(schemas.PersonaHeaderLeaseDeadline, d.UTC().Format(time.RFC3339Nano))
		}
	}
	if req.ProgressInterval > 0 {
		r.Header.Set(schemas.PersonaHeaderProgressInterval, strconv.FormatInt(req.ProgressInterval.Milliseconds(), 10))
	}
	return r, nil
}

// answer turns a response into the attempt's result.
func (h *HTTPInvoker) answer(ctx context.Context, resp *http.Response) (Result, error) {
	if kind := streamKindOf(resp.Header); kind != notStreamed && resp.StatusCode/100 == 2 {
		return h.streamAnswer(ctx, resp, kind) // text/event-stream, NDJSON: live output
	}
	limit := h.cfg.MaxResponseBytes
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	oversize := int64(len(body)) > limit
	if oversize {
		body = body[:limit]
	}
	// Progress and the answer are kept on failures too: a plateau is read
	// from them, and the next attempt may be shown what was wrong.
	res := Result{Output: outputOf(body)}
	res.Progress, _ = parseProgress(body)
	res.Usage, _ = parseUsage(body) // a failed answer may have been paid for too
	statusErr := h.status.FromResponse(resp.StatusCode, string(body), resp.Header, time.Now())
	switch {
	case statusErr != nil:
		// The status decides even if the body was cut short or too long.
		return res, statusErr
	case readErr != nil:
		return res, transportError(ctx, readErr)
	case oversize:
		return res, Terminal(fmt.Errorf("%w: over %d bytes", ErrResponseTooLarge, limit))
	}
	return res, nil
}

// transportError classifies a failure to get an answer at all.
func transportError(ctx context.Context, err error) error {
	err = fmt.Errorf("persona endpoint: %w", err)
	var nerr net.Error
	var cert *tls.CertificateVerificationError
	switch {
	case ctx.Err() != nil:
		return interrupted(ctx, err)
	case isNetwork(err), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// EOF: the endpoint hung up mid-exchange, which is no answer either.
		return Network(err)
	case errors.As(err, &nerr) && nerr.Timeout():
		return Timeout(err)
	case errors.As(err, &cert):
		return Terminal(err)
	}
	return err
}

// drainClose reads a little of what is left so the connection can be
// reused, then closes the body.
func drainClose(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, maxDrain)
	_ = body.Close()
}

// ---- The wire format, shared with CommandInvoker ----

// ErrResponseTooLarge is a persona answer over its configured size limit.
// It is terminal: the same request would produce the same answer.
var ErrResponseTooLarge = errors.New("persona response too large")

// ErrInvalidConfig is returned, wrapped and naming the field, by NewHTTP
// and NewCommand. It is schemas.ErrInvalidConfig, the same error in every
// personaq package.
var ErrInvalidConfig = schemas.ErrInvalidConfig

func configErr(field, format string, args ...any) error {
	return &retry.FieldError{Err: ErrInvalidConfig, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Envelope is what the built-in invokers hand a persona: the HTTP request
// body and the command's standard input.
type Envelope struct {
	Request *schemas.PersonaRequest `json:"request"`
	Attempt int                     `json:"attempt"`
	Role    retry.Role              `json:"role"`
	Agent   string                  `json:"agent"`
	// Feedback lists what earlier attempts should learn from, oldest first
	// (retry with feedback); never null.
	Feedback []string `json:"feedback"`
	// PreviousErrors are the earlier failed attempts, oldest first; never
	// null.
	PreviousErrors []schemas.AttemptRecord `json:"previous_errors"`
	// ProgressIntervalMs asks the persona to report progress this often
	// (adaptive retry's poll interval, doubled after an attempt whose
	// progress improved); absent when not asked.
	ProgressIntervalMs int64 `json:"progress_interval_ms,omitempty"`
}

// NewEnvelope builds the Envelope for one attempt.
func NewEnvelope(req *Request) Envelope {
	env := Envelope{
		Request:        req.Message,
		Attempt:        req.Attempt,
		Role:           req.Role,
		Agent:          req.Agent,
		Feedback:       append([]string{}, req.Feedback...),
		PreviousErrors: []schemas.AttemptRecord{},

		ProgressIntervalMs: req.ProgressInterval.Milliseconds(),
	}
	for _, a := range req.Previous {
		if a.Class.Failed() {
			env.PreviousErrors = append(env.PreviousErrors, a.Record())
		}
	}
	return env
}

// correlationID falls back to the request ID so every call can be traced.
func correlationID(m *schemas.PersonaRequest) string {
	if m.CorrelationID != "" {
		return m.CorrelationID
	}
	return m.RequestID
}

// idempotencyKey is stable for one attempt: a resent call (a dead
// keep-alive connection, a redelivery of the same attempt) reuses it.
func idempotencyKey(req *Request) string {
	return fmt.Sprintf("%s/%s/%d", req.Message.TaskID, req.Message.Step, req.Attempt)
}

// progressReport is the progress a persona may report in its answer.
type progressReport struct {
	Progress *schemas.Progress `json:"progress"`
}

// parseProgress reads {"progress":{"completed":N,"total":M}} from a JSON
// document. Anything else, or an impossible count, reports nothing.
func parseProgress(doc []byte) (retry.Progress, bool) {
	var r progressReport
	if json.Unmarshal(doc, &r) != nil || r.Progress == nil {
		return retry.Progress{}, false
	}
	p := retry.Progress{Completed: r.Progress.Completed, Total: r.Progress.Total}
	if p.Total <= 0 || p.Completed < 0 || p.Completed > p.Total {
		return retry.Progress{}, false
	}
	return p, true
}

// errorReport is how a persona names its error in a JSON answer:
// {"error_type":"CommitError","error":"nothing to commit"}, or
// {"error":{"type":"CommitError","message":"…"}}, or {"type":"CommitError"}.
type errorReport struct {
	ErrorType string          `json:"error_type"`
	Type      string          `json:"type"`
	Error     json.RawMessage `json:"error"`
}

// typeNameRe is a simple type (class) name: CommitError, BadRequestError.
// Provider error codes such as invalid_request_error are not type names.
var typeNameRe = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]{0,127}$`)

// parseErrorType reads the error type (and message) a JSON document names.
// With strict, only the error_type key counts (a command's stdout line,
// whose other JSON is output). A name that is not a simple type name is
// ignored.
func parseErrorType(doc []byte, strict bool) (typ, msg string) {
	var r errorReport
	if json.Unmarshal(doc, &r) != nil {
		return "", ""
	}
	var nested struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	if json.Unmarshal(r.Error, &nested) != nil {
		_ = json.Unmarshal(r.Error, &msg) // "error": "text"
	} else {
		msg = nested.Message
	}
	candidates := []string{r.ErrorType}
	if !strict {
		candidates = append(candidates, nested.Type, r.Type)
	}
	for _, t := range candidates {
		if typeNameRe.MatchString(t) {
			return t, msg
		}
	}
	return "", ""
}

// outputOf keeps a JSON answer as it is and wraps anything else in a JSON
// string, so Result.Output is always valid JSON (or empty).
func outputOf(b []byte) json.RawMessage {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0:
		return nil
	case json.Valid(b):
		return json.RawMessage(b)
	}
	s, _ := json.Marshal(string(b)) // a string always encodes
	return s
}

// interrupted classifies an attempt cut short by its context. A deadline
// is a timeout; any other cancellation (shutdown) stays unclassified so the
// runtime, which reads context.Cause, can release the message uncounted.
func interrupted(ctx context.Context, err error) error {
	for _, e := range []error{ctx.Err(), context.Cause(ctx)} {
		if e != nil && !errors.Is(err, e) {
			err = fmt.Errorf("%w: %w", err, e)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Timeout(err)
	}
	return err
}
