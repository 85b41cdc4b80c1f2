package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// tokenSet checks bearer tokens in constant time: every known token is
// compared (as SHA-256 digests, so lengths do not leak either) whatever
// matched first.
type tokenSet struct {
	tokens []Token
	sums   [][sha256.Size]byte
}

func newTokenSet(tokens []Token) *tokenSet {
	s := &tokenSet{tokens: tokens, sums: make([][sha256.Size]byte, len(tokens))}
	for i, t := range tokens {
		s.sums[i] = sha256.Sum256([]byte(t.Secret))
	}
	return s
}

// match returns the token whose secret is presented, or false.
func (s *tokenSet) match(presented string) (Token, bool) {
	sum := sha256.Sum256([]byte(presented))
	found := -1
	for i := range s.sums {
		if subtle.ConstantTimeCompare(sum[:], s.sums[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Token{}, false
	}
	return s.tokens[found], true
}

// bearer extracts the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// authorize wraps h: 401 without a known token, 403 without scope.
func (s *Server) authorize(scope Scope, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		presented, ok := bearer(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="personaq"`)
			writeProblem(w, newProblem(http.StatusUnauthorized, probUnauthorized, "send Authorization: Bearer <token>"))
			return
		}
		tok, ok := s.tokens.match(presented)
		if !ok {
			s.log.Info().Str("path", r.URL.Path).Str("remote", r.RemoteAddr).Msg("api: refused an unknown bearer token")
			w.Header().Set("WWW-Authenticate", `Bearer realm="personaq", error="invalid_token"`)
			writeProblem(w, newProblem(http.StatusUnauthorized, probUnauthorized, "the bearer token is not one this server knows"))
			return
		}
		if !tok.allows(scope) {
			s.log.Info().Str("token", tok.Name).Str("scope", string(scope)).Str("path", r.URL.Path).Msg("api: token lacks the scope")
			writeProblem(w, newProblem(http.StatusForbidden, probForbidden,
				"token "+tok.Name+" does not have scope "+string(scope)).with("scope", string(scope)))
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), tokenNameKey{}, tok.Name)))
	}
}

type tokenNameKey struct{}

// tokenName is the name of the token that authorized r ("" when none).
func tokenName(r *http.Request) string {
	name, _ := r.Context().Value(tokenNameKey{}).(string)
	return name
}
