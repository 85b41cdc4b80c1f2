package retry

import "errors"

// ErrInvalidPolicy is returned (wrapped, naming the field) by Policy.Validate
// and by the parsers of presets, schedules and persona timeouts.
var ErrInvalidPolicy = errors.New("invalid policy")

// ErrUnknownPreset is returned by Preset for a name that is not a preset.
var ErrUnknownPreset = errors.New("unknown policy preset")
