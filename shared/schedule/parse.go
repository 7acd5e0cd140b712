package schedule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/batchwork/batchwork/shared/spec"
)

// Parse decodes a schedule as a client submits it (a JSON object), applies
// the defaults and validates it. Decoding is strict: unknown and duplicate
// fields, values of the wrong type, and the server-assigned id, owner and
// createdAt are errors. The job spec goes through shared/spec's parser and
// is stored in its canonical JSON. Every error is a *spec.ValidationError
// naming the field, so the API can answer 400 without writing anything.
func Parse(data []byte) (*Schedule, error) {
	if len(data) > MaxScheduleBytes {
		return nil, wholeError(fmt.Sprintf("schedule is %d bytes; at most %d are allowed", len(data), MaxScheduleBytes))
	}
	if !utf8.Valid(data) {
		return nil, wholeError("schedule is not valid UTF-8")
	}
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		return nil, wholeError("syntax error: " + err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		return nil, wholeError("schedule must be a JSON object")
	}

	s := new(Schedule)
	var errs errorList
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		key, _ := tok.(string)
		var raw json.RawMessage
		if err == nil {
			err = dec.Decode(&raw)
		}
		if err != nil { // cannot happen: the document is valid JSON
			return nil, wholeError("syntax error: " + err.Error())
		}
		field := fieldName(key)
		if seen[key] {
			errs.add(field, "is given more than once")
			continue
		}
		seen[key] = true
		if string(raw) == "null" {
			continue
		}
		switch key {
		case "name":
			decodeString(&errs, field, raw, &s.Name)
		case "spec":
			if raw[0] != '{' {
				errs.add(field, "must be an object (a job spec)")
				continue
			}
			s.Spec = raw
		case "params":
			if err := json.Unmarshal(raw, &s.Params); err != nil || raw[0] != '{' {
				errs.add(field, "must be an object of names to string values")
			}
		case "expression":
			decodeString(&errs, field, raw, &s.Expression)
		case "timeZone":
			decodeString(&errs, field, raw, &s.TimeZone)
		case "start":
			decodeTime(&errs, field, raw, &s.Start)
		case "end":
			decodeTime(&errs, field, raw, &s.End)
		case "overlap":
			decodeString(&errs, field, raw, (*string)(&s.Overlap))
		case "catchUp":
			decodeString(&errs, field, raw, (*string)(&s.CatchUp))
		case "paused":
			if err := json.Unmarshal(raw, &s.Paused); err != nil {
				errs.add(field, "must be true or false")
			}
		case "id", "owner", "createdAt":
			errs.add(field, "is assigned by the server and must not be given")
		default:
			errs.add(field, "is not a schedule field")
		}
	}
	if len(errs) > 0 {
		// Validating a half-decoded schedule would add noise ("name: is
		// required" after "name: must be a string").
		return nil, errs.err()
	}

	s.SetDefaults()
	errs, job := s.validate()
	if err := errs.err(); err != nil {
		return nil, err
	}
	canonical, err := job.Encode()
	if err != nil {
		return nil, fmt.Errorf("parse schedule: encode spec: %w", err)
	}
	s.Spec = canonical
	return s, nil
}

func wholeError(msg string) error {
	return &spec.ValidationError{Errors: []spec.FieldError{{Message: msg}}}
}

// fieldName keeps an unknown key readable in an error without echoing a
// huge one back.
func fieldName(key string) string {
	const maxLen = 64
	if len(key) <= maxLen {
		return key
	}
	cut := maxLen
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut--
	}
	return key[:cut] + "…"
}

func decodeString(errs *errorList, field string, raw json.RawMessage, dst *string) {
	if err := json.Unmarshal(raw, dst); err != nil {
		errs.add(field, "must be a string")
	}
}

// decodeTime reads an RFC 3339 time. time.Time's own UnmarshalJSON would
// do, but its error does not say which field it concerns.
func decodeTime(errs *errorList, field string, raw json.RawMessage, dst *time.Time) {
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		errs.add(field, `must be an RFC 3339 time string such as "2024-03-10T09:00:00Z"`)
		return
	}
	t, err := time.Parse(time.RFC3339Nano, str)
	if err != nil {
		errs.add(field, `must be an RFC 3339 time such as "2024-03-10T09:00:00Z"`)
		return
	}
	*dst = t
}
