package parquetout

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/batchwork/batchwork/shared/spec"
)

// column is one column of the output schema, as rows are built.
type column struct {
	name     string
	typ      spec.ColumnType
	nullable bool
	index    int // its leaf column: every column has exactly one
}

// node is the Parquet type of a column of type t: the logical types
// DuckDB, Spark and Athena read as the spec's type names say.
func node(t spec.ColumnType) parquet.Node {
	switch t.Kind {
	case spec.ColString:
		return parquet.String()
	case spec.ColInt32:
		return parquet.Int(32)
	case spec.ColInt64:
		return parquet.Int(64)
	case spec.ColFloat:
		return parquet.Leaf(parquet.FloatType)
	case spec.ColDouble:
		return parquet.Leaf(parquet.DoubleType)
	case spec.ColBoolean:
		return parquet.Leaf(parquet.BooleanType)
	case spec.ColTimestamp:
		return parquet.Timestamp(parquet.Microsecond) // adjusted to UTC
	case spec.ColDate:
		return parquet.Date()
	case spec.ColBinary:
		return parquet.Leaf(parquet.ByteArrayType)
	case spec.ColDecimal:
		return parquet.Decimal(t.Scale, t.Precision, decimalPhysical(t.Precision))
	case spec.ColList:
		return parquet.List(node(*t.Elem))
	}
	panic("parquetout: column type " + t.Kind + " passed validation but has no Parquet type")
}

// decimalBytes is the width of a decimal over 18 digits: 16 bytes hold
// 38 digits in two's complement.
const decimalBytes = 16

// decimalPhysical is the narrowest physical type of a decimal of
// precision p, as the Parquet format recommends.
func decimalPhysical(p int) parquet.Type {
	switch {
	case p <= 9:
		return parquet.Int32Type
	case p <= 18:
		return parquet.Int64Type
	}
	return parquet.FixedLenByteArrayType(decimalBytes)
}

// scalar converts one JSON value (decoded with UseNumber) to a value of
// type t; the error says what was wanted and what the record has.
func scalar(t spec.ColumnType, v any) (parquet.Value, error) {
	switch t.Kind {
	case spec.ColString:
		if s, ok := v.(string); ok {
			return parquet.ByteArrayValue([]byte(s)), nil
		}
	case spec.ColInt32, spec.ColInt64:
		if n, ok := v.(json.Number); ok {
			bits := 64
			if t.Kind == spec.ColInt32 {
				bits = 32
			}
			i, err := strconv.ParseInt(string(n), 10, bits)
			if err != nil {
				return parquet.Value{}, fmt.Errorf("want an %s (an integer number in its range), got %s", t.Kind, n)
			}
			if bits == 32 {
				return parquet.Int32Value(int32(i)), nil
			}
			return parquet.Int64Value(i), nil
		}
	case spec.ColFloat, spec.ColDouble:
		if n, ok := v.(json.Number); ok {
			bits := 64
			if t.Kind == spec.ColFloat {
				bits = 32
			}
			f, err := strconv.ParseFloat(string(n), bits)
			if err != nil {
				return parquet.Value{}, fmt.Errorf("want a %s, got %s, out of its range", t.Kind, n)
			}
			if bits == 32 {
				return parquet.FloatValue(float32(f)), nil
			}
			return parquet.DoubleValue(f), nil
		}
	case spec.ColBoolean:
		if b, ok := v.(bool); ok {
			return parquet.BooleanValue(b), nil
		}
	case spec.ColTimestamp:
		if s, ok := v.(string); ok {
			ts, err := time.Parse(time.RFC3339Nano, s)
			switch {
			case err != nil:
				return parquet.Value{}, fmt.Errorf("want a timestamp as an RFC 3339 string (2006-01-02T15:04:05Z, or with an offset), got %q", clip(s))
			case ts.Nanosecond()%1000 != 0:
				return parquet.Value{}, fmt.Errorf("%q has digits below a microsecond, which a TIMESTAMP(MICROS) cannot hold", clip(s))
			}
			return parquet.Int64Value(ts.UnixMicro()), nil
		}
	case spec.ColDate:
		if s, ok := v.(string); ok {
			d, err := time.Parse(time.DateOnly, s)
			if err != nil {
				return parquet.Value{}, fmt.Errorf("want a date as YYYY-MM-DD, got %q", clip(s))
			}
			return parquet.Int32Value(int32(d.Unix() / 86400)), nil
		}
	case spec.ColBinary:
		if s, ok := v.(string); ok {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return parquet.Value{}, fmt.Errorf("want binary as a base64 string, got %q: %v", clip(s), err)
			}
			return parquet.ByteArrayValue(b), nil
		}
	case spec.ColDecimal:
		var s string
		switch d := v.(type) {
		case string:
			s = d
		case json.Number:
			s = string(d)
		default:
			return parquet.Value{}, fmt.Errorf("want a decimal(%d,%d) as a string or a number, got %s", t.Precision, t.Scale, describe(v))
		}
		return decimal(t, s)
	}
	return parquet.Value{}, fmt.Errorf("want %s, got %s", want(t), describe(v))
}

// decimal converts the text of a decimal number to its unscaled value:
// at most t.Scale decimals and t.Precision digits, no exponent, so no
// value is rounded on its way into the file.
func decimal(t spec.ColumnType, s string) (parquet.Value, error) {
	bad := func(why string) (parquet.Value, error) {
		return parquet.Value{}, fmt.Errorf("want a decimal(%d,%d), got %q: %s", t.Precision, t.Scale, clip(s), why)
	}
	digits := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	whole, frac, _ := strings.Cut(digits, ".")
	switch {
	case whole == "" && frac == "" || !allDigits(whole) || !allDigits(frac):
		return bad("not a plain decimal number (digits, an optional sign and point, no exponent)")
	case len(frac) > t.Scale:
		return bad(fmt.Sprintf("more than %d decimals", t.Scale))
	}
	text := strings.TrimLeft(whole+frac+strings.Repeat("0", t.Scale-len(frac)), "0")
	if len(text) > t.Precision {
		return bad(fmt.Sprintf("more than %d digits", t.Precision))
	}
	u, _ := new(big.Int).SetString("0"+text, 10)
	if strings.HasPrefix(s, "-") {
		u.Neg(u)
	}
	switch {
	case t.Precision <= 9:
		return parquet.Int32Value(int32(u.Int64())), nil
	case t.Precision <= 18:
		return parquet.Int64Value(u.Int64()), nil
	}
	return parquet.FixedLenByteArrayValue(twosComplement(u, decimalBytes)), nil
}

func allDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// twosComplement is u in n big-endian bytes of two's complement (u fits).
func twosComplement(u *big.Int, n int) []byte {
	b := make([]byte, n)
	if u.Sign() >= 0 {
		return u.FillBytes(b)
	}
	// -x is 2^(8n) - x.
	m := new(big.Int).Lsh(big.NewInt(1), uint(8*n))
	return m.Add(m, u).FillBytes(b)
}

func want(t spec.ColumnType) string {
	switch t.Kind {
	case spec.ColString:
		return "a string"
	case spec.ColFloat, spec.ColDouble:
		return "a " + t.Kind + " (a number)"
	case spec.ColInt32, spec.ColInt64:
		return "an " + t.Kind + " (an integer number)"
	case spec.ColBoolean:
		return "true or false"
	case spec.ColTimestamp:
		return "a timestamp (an RFC 3339 string)"
	case spec.ColDate:
		return "a date (a YYYY-MM-DD string)"
	case spec.ColBinary:
		return "binary (a base64 string)"
	}
	return t.Kind
}

// describe names a JSON value's type, with the value when short.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "the string " + strconv.Quote(clip(x))
	case json.Number:
		return "the number " + clip(string(x))
	case bool:
		return strconv.FormatBool(x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
