package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// String formats d like time.Duration ("1m30s").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a Go duration string so the stored spec stays
// readable and re-parses through the same path as hand-written specs.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// UnmarshalJSON accepts a Go duration string ("30s", "5m"). A bare number
// is rejected rather than guessed at: nanoseconds and seconds are both
// plausible readings.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errDuration
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

var errDuration = errors.New(`must be a duration such as "30s" or "5m"`)

// ParseDuration parses a Go duration string ("30s", "1h30m").
func ParseDuration(s string) (Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, errDuration
	}
	return Duration(v), nil
}

// MarshalJSON writes s as a plain integer byte count, the canonical form.
func (s Size) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, int64(s), 10), nil
}

// UnmarshalJSON accepts an integer byte count or a string with a unit
// (see ParseSize).
func (s *Size) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		return nil
	case len(b) > 0 && b[0] == '"':
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return errSize
		}
		v, err := ParseSize(str)
		if err != nil {
			return err
		}
		*s = v
		return nil
	default:
		v, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			return errSize
		}
		*s = Size(v)
		return nil
	}
}

var errSize = errors.New(`must be a byte count such as 1048576 or "64MiB" (units B, KB, KiB, MB, MiB, GB, GiB)`)

// sizeUnits are the accepted suffixes. Both decimal and binary units are
// accepted because users mean different things by "MB"; spelling the unit
// out exactly is what removes the ambiguity, so matching is case-sensitive.
var sizeUnits = map[string]int64{
	"":    1,
	"B":   1,
	"KB":  1000,
	"KiB": 1 << 10,
	"MB":  1000 * 1000,
	"MiB": 1 << 20,
	"GB":  1000 * 1000 * 1000,
	"GiB": 1 << 30,
}

// ParseSize parses a non-negative integer byte count with an optional unit:
// "1048576", "512KiB", "64 MiB", "1GB".
func ParseSize(str string) (Size, error) {
	str = strings.TrimSpace(str)
	i := 0
	for i < len(str) && '0' <= str[i] && str[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, errSize
	}
	mult, ok := sizeUnits[strings.TrimSpace(str[i:])]
	if !ok {
		return 0, errSize
	}
	n, err := strconv.ParseInt(str[:i], 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", str)
	}
	return Size(n * mult), nil
}
