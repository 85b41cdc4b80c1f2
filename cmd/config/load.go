package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Load reads the YAML file at path and returns its effective
// configuration: strictly decoded (an unknown key is an error naming its
// line), overridden from the environment, completed with defaults and
// validated. env looks variables up (os.LookupEnv); nil means none. See
// the package documentation for every variable.
//
// A file that cannot be read is returned as is (an *fs.PathError).
// Anything wrong with the configuration is one error wrapping ErrInvalid
// that lists every problem found (errors.Join of *FieldError), each naming
// its field by YAML path.
func Load(path string, env func(string) (string, bool)) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, env)
}

// Parse is Load for YAML already in memory.
func Parse(data []byte, env func(string) (string, bool)) (*File, error) {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	var probs problems
	f, err := decode(data, &probs)
	if err != nil {
		return nil, err
	}
	timeoutsJSON := f.applyEnv(env, &probs)
	f.applyDefaults(timeoutsJSON)
	f.validate(&probs)
	if len(probs) > 0 {
		return nil, probs.err()
	}
	return f, nil
}

// decode strictly decodes data. Problems the decoder can go on after
// (unknown keys, wrong types, bad durations) are added to probs, named by
// YAML path; a document that is not YAML at all is returned as an error.
func decode(data []byte, probs *problems) (*File, error) {
	f := &File{}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, syntaxErr(err)
	}
	idx := indexPaths(&root)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(f)
	var te *yaml.TypeError
	switch {
	case errors.Is(err, io.EOF): // an empty file: defaults and validation speak
	case errors.As(err, &te):
		for _, msg := range te.Errors {
			*probs = append(*probs, idx.fieldError(msg))
		}
	case err != nil:
		return nil, syntaxErr(err)
	}
	var extra yaml.Node
	if dec.Decode(&extra) == nil {
		probs.addLine("", extra.Line, "a second YAML document; the file must hold one")
	}
	for _, name := range slices.Sorted(maps.Keys(f.PersonaConfigs)) {
		p := f.PersonaConfigs[name]
		if p == nil { // "planner:" with nothing under it
			p = &PersonaConfig{}
			f.PersonaConfigs[name] = p
		}
		// policy.attempt_timeout is another spelling of timeout.
		switch at := p.Policy.AttemptTimeout; {
		case at == 0:
		case p.Timeout == 0:
			p.Timeout = at
		case p.Timeout != at:
			probs.add("personas."+name+".policy.attempt_timeout", "%s contradicts timeout %s: set one of them", at, p.Timeout)
		}
		p.Policy.AttemptTimeout = 0
	}
	return f, nil
}

var lineRe = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

func syntaxErr(err error) error {
	fe := &FieldError{Message: err.Error()}
	if m := lineRe.FindStringSubmatch(fe.Message); m != nil {
		fe.Line, _ = strconv.Atoi(m[1])
		fe.Message = m[2]
	}
	return fe
}

// pathIndex remembers the YAML path of every key and value by line, so
// the decoder's "line N: …" messages can name their field.
type pathIndex []pathEntry

type pathEntry struct {
	line int
	key  string // the mapping key, if the entry is one
	path string
}

func indexPaths(root *yaml.Node) pathIndex {
	var idx pathIndex
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := join(path, k.Value)
				idx = append(idx, pathEntry{line: k.Line, key: k.Value, path: p})
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				idx = append(idx, pathEntry{line: c.Line, path: p})
				walk(c, p)
			}
		case yaml.ScalarNode:
			idx = append(idx, pathEntry{line: n.Line, path: path})
		}
	}
	walk(root, "")
	return idx
}

// lookup returns the path of key on line, or (key == "") of the first
// thing on line.
func (idx pathIndex) lookup(line int, key string) string {
	for _, e := range idx {
		if e.line == line && (key == "" || e.key == key) {
			return e.path
		}
	}
	return ""
}

var unknownFieldRe = regexp.MustCompile(`^field (\S+) not found(?: in type \S+)?$`)

// fieldError turns one decoder message ("line 7: field nmae not found in
// type config.NATSConfig") into a FieldError naming the field.
func (idx pathIndex) fieldError(msg string) *FieldError {
	m := lineRe.FindStringSubmatch(msg)
	if m == nil {
		return &FieldError{Message: msg}
	}
	line, _ := strconv.Atoi(m[1])
	fe := &FieldError{Line: line, Message: m[2]}
	if u := unknownFieldRe.FindStringSubmatch(fe.Message); u != nil {
		fe.Field = idx.lookup(line, u[1])
		fe.Message = fmt.Sprintf("unknown key %q", u[1])
		return fe
	}
	fe.Field = idx.lookup(line, "")
	return fe
}
