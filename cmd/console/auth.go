package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
)

// Cookies: the CSRF token (double submit) and the login proof, an HMAC of
// the CSRF token under the console token, so neither cookie is the token.
const (
	csrfCookie = "pq_csrf"
	authCookie = "pq_auth"
	csrfField  = "csrf"
)

// auth checks mutations: the console token (login cookie or bearer header)
// and, for browser forms, the CSRF token.
type auth struct {
	token    string
	readOnly bool
}

type csrfKey struct{}

// withCSRF gives every visitor a CSRF cookie and puts its value in the
// request context for the templates.
func (a *auth) withCSRF(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := ""
		if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 32 {
			tok = c.Value
		} else {
			tok = randomToken()
			setCookie(w, csrfCookie, tok)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), csrfKey{}, tok)))
	})
}

func csrfFrom(ctx context.Context) string {
	s, _ := ctx.Value(csrfKey{}).(string)
	return s
}

func setCookie(w http.ResponseWriter, name, value string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// proof is the login cookie's value for a CSRF token.
func (a *auth) proof(csrf string) string {
	m := hmac.New(sha256.New, []byte(a.token))
	m.Write([]byte("personaq-console:" + csrf))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func equal(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// loggedIn reports whether the browser holds a valid login cookie.
func (a *auth) loggedIn(r *http.Request) bool {
	if a.readOnly {
		return false
	}
	c, err := r.Cookie(authCookie)
	return err == nil && equal(c.Value, a.proof(csrfFrom(r.Context())))
}

// sameOrigin refuses a request whose Origin names another site.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return o == ""
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// validCSRF: the form field matches the cookie (double submit).
func validCSRF(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	return err == nil && equal(r.PostFormValue(csrfField), c.Value)
}

// allow decides whether a mutation may go on; the error says why not.
func (a *auth) allow(r *http.Request) error {
	if a.readOnly {
		return errReadOnly
	}
	if !sameOrigin(r) {
		return errForbidden
	}
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		if equal(bearer, a.token) {
			return nil
		}
		return errForbidden
	}
	if validCSRF(r) && a.loggedIn(r) {
		return nil
	}
	return errForbidden
}

// login checks a submitted token (with the CSRF token) and sets the login
// cookie.
func (a *auth) login(w http.ResponseWriter, r *http.Request) bool {
	if a.readOnly || !sameOrigin(r) || !validCSRF(r) || !equal(r.PostFormValue("token"), a.token) {
		return false
	}
	setCookie(w, authCookie, a.proof(csrfFrom(r.Context())))
	return true
}

func logout(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: authCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}
