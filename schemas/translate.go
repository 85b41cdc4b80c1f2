package schemas

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// fromValidation turns the library's error tree into one FieldError, so
// callers never see the library's types. Of several failures it names the
// most specific (a leaf of the tree) with the lexically first field, which
// keeps the answer stable although the library walks objects in map order.
func fromValidation(err error) *FieldError {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return &FieldError{Problem: err.Error()}
	}
	var all []*FieldError
	for _, leaf := range leaves(verr, nil) {
		all = append(all, &FieldError{Field: fieldOf(leaf), Problem: problemOf(leaf.ErrorKind)})
	}
	return slices.MinFunc(all, func(a, b *FieldError) int {
		return cmp.Or(strings.Compare(a.Field, b.Field), strings.Compare(a.Problem, b.Problem))
	})
}

func leaves(e *jsonschema.ValidationError, acc []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return append(acc, e)
	}
	for _, c := range e.Causes {
		acc = leaves(c, acc)
	}
	return acc
}

// fieldOf is the dotted instance path, extended by the property a
// "required" or "additionalProperties" failure is about: the object is not
// the problem, its missing or unknown member is.
func fieldOf(e *jsonschema.ValidationError) string {
	path := slices.Clone(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		if len(k.Missing) > 0 {
			path = append(path, k.Missing[0])
		}
	case *kind.AdditionalProperties:
		if len(k.Properties) > 0 {
			path = append(path, slices.Min(k.Properties))
		}
	}
	return strings.Join(path, ".")
}

// problemOf covers every keyword the schemas in json/ use; anything else
// falls back to naming the keyword.
func problemOf(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Required:
		return "is required"
	case *kind.AdditionalProperties:
		return "is not a field of this message"
	case *kind.Type:
		return "must be " + withArticle(strings.Join(k.Want, " or "))
	case *kind.Const:
		return fmt.Sprintf("must be %v", k.Want)
	case *kind.Enum:
		return "must be one of " + joinAny(k.Want)
	case *kind.Pattern:
		return "must match " + k.Want
	case *kind.MinLength:
		if k.Want == 1 {
			return "must not be empty"
		}
		return fmt.Sprintf("must be at least %d characters", k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters", k.Want)
	case *kind.Minimum:
		return "must be at least " + k.Want.RatString()
	case *kind.Maximum:
		return "must be at most " + k.Want.RatString()
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %d items", k.Want)
	case *kind.Format:
		return "must be " + formatPhrase(k.Want)
	case *kind.ContentEncoding:
		return "must be " + k.Want
	}
	return "fails " + strings.Join(k.KeywordPath(), "/")
}

func formatPhrase(f string) string {
	if f == "date-time" {
		return "an RFC 3339 date-time"
	}
	return "a valid " + f
}

func withArticle(noun string) string {
	if noun != "" && strings.ContainsRune("aeiouAEIOU", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}

func joinAny(vs []any) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ", ")
}
