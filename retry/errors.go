package retry

import "errors"

// FieldError is a configuration problem that names its field, so a caller
// reports it under its own path (errors.As) without reading the text. It
// wraps Err: ErrInvalidPolicy here; the handlers package uses it with its
// ErrInvalidConfig.
type FieldError struct {
	Err     error
	Field   string
	Message string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Err.Error() + ": " + e.Message
	}
	return e.Err.Error() + ": " + e.Field + ": " + e.Message
}

// Unwrap returns Err, so errors.Is matches the package's sentinel.
func (e *FieldError) Unwrap() error { return e.Err }

// ErrInvalidPolicy is returned (wrapped, naming the field) by Policy.Validate
// and by the parsers of presets, schedules and persona timeouts.
var ErrInvalidPolicy = errors.New("invalid policy")

// ErrUnknownPreset is returned by Preset for a name that is not a preset.
var ErrUnknownPreset = errors.New("unknown policy preset")
