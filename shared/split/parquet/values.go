package parquet

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// converter returns how a leaf column's values are written as JSON: by
// their logical type, or else by their physical one.
func converter(c *pq.Column) (func(pq.Value) ([]byte, error), error) {
	kind := c.Type().Kind()
	switch lt := logical(c).(type) {
	case *format.DecimalType:
		scale := int(lt.Scale)
		return func(v pq.Value) ([]byte, error) {
			return strconv.AppendQuote(nil, decimal(unscaled(kind, v), scale)), nil
		}, nil
	case *format.DateType:
		return func(v pq.Value) ([]byte, error) {
			d := time.Unix(int64(v.Int32())*86400, 0).UTC()
			return strconv.AppendQuote(nil, d.Format(time.DateOnly)), nil
		}, nil
	case *format.TimestampType:
		unit, err := nanosPer(&lt.Unit)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", c.Name(), err)
		}
		return func(v pq.Value) ([]byte, error) {
			return timestamp(v.Int64(), unit), nil
		}, nil
	case *format.TimeType:
		unit, err := nanosPer(&lt.Unit)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", c.Name(), err)
		}
		return func(v pq.Value) ([]byte, error) {
			n := v.Int64() * unit
			if kind == pq.Int32 {
				n = int64(v.Int32()) * unit
			}
			t := time.Unix(0, n).UTC()
			return strconv.AppendQuote(nil, t.Format("15:04:05.999999999")), nil
		}, nil
	case *format.IntType:
		if lt.IsSigned {
			break
		}
		return func(v pq.Value) ([]byte, error) {
			if kind == pq.Int32 {
				return strconv.AppendUint(nil, uint64(v.Uint32()), 10), nil
			}
			return strconv.AppendUint(nil, v.Uint64(), 10), nil
		}, nil
	case *format.StringType, *format.EnumType:
		return func(v pq.Value) ([]byte, error) {
			return json.Marshal(string(v.ByteArray()))
		}, nil
	case *format.JsonType:
		// A JSON column's text is placed as is when it is JSON.
		return func(v pq.Value) ([]byte, error) {
			b := v.ByteArray()
			if json.Valid(b) {
				return append([]byte(nil), b...), nil
			}
			return json.Marshal(string(b))
		}, nil
	case *format.UUIDType:
		return func(v pq.Value) ([]byte, error) {
			b := v.ByteArray()
			if len(b) != 16 {
				return json.Marshal(base64.StdEncoding.EncodeToString(b))
			}
			h := hex.EncodeToString(b)
			return strconv.AppendQuote(nil, h[:8]+"-"+h[8:12]+"-"+h[12:16]+"-"+h[16:20]+"-"+h[20:]), nil
		}, nil
	case *format.Float16Type:
		return func(v pq.Value) ([]byte, error) {
			b := v.ByteArray()
			if len(b) != 2 {
				return nil, fmt.Errorf("column %s: a float16 of %d bytes", c.Name(), len(b))
			}
			return float(float64(half(binary.LittleEndian.Uint16(b))), 32), nil
		}, nil
	case *format.NullType:
		return func(pq.Value) ([]byte, error) { return []byte("null"), nil }, nil
	}
	switch kind {
	case pq.Boolean:
		return func(v pq.Value) ([]byte, error) { return strconv.AppendBool(nil, v.Boolean()), nil }, nil
	case pq.Int32:
		return func(v pq.Value) ([]byte, error) { return strconv.AppendInt(nil, int64(v.Int32()), 10), nil }, nil
	case pq.Int64:
		return func(v pq.Value) ([]byte, error) { return strconv.AppendInt(nil, v.Int64(), 10), nil }, nil
	case pq.Int96:
		// Legacy timestamps (Impala, Hive, old Spark): nanoseconds of
		// the day, then the Julian day.
		return func(v pq.Value) ([]byte, error) {
			i := v.Int96()
			nanos := int64(uint64(i[1])<<32 | uint64(i[0]))
			days := int64(i[2]) - 2440588 // the Julian day of 1970-01-01
			return timestamp(days*86400e9+nanos, 1), nil
		}, nil
	case pq.Float:
		return func(v pq.Value) ([]byte, error) { return float(float64(v.Float()), 32), nil }, nil
	case pq.Double:
		return func(v pq.Value) ([]byte, error) { return float(v.Double(), 64), nil }, nil
	case pq.ByteArray, pq.FixedLenByteArray:
		return func(v pq.Value) ([]byte, error) {
			return strconv.AppendQuote(nil, base64.StdEncoding.EncodeToString(v.ByteArray())), nil
		}, nil
	}
	return nil, fmt.Errorf("column %s: cannot read type %s", c.Name(), c.Type())
}

// nanosPer is the nanoseconds in one unit of a time or timestamp.
func nanosPer(u *format.TimeUnit) (int64, error) {
	switch u.Value.(type) {
	case *format.MilliSeconds:
		return 1e6, nil
	case *format.MicroSeconds:
		return 1e3, nil
	case *format.NanoSeconds:
		return 1, nil
	}
	return 0, fmt.Errorf("unknown time unit %s", u)
}

// timestamp writes n units since the epoch as a quoted RFC 3339 time in
// UTC, with as many fractional digits as it needs.
func timestamp(n, unit int64) []byte {
	sec, frac := n/(1e9/unit), n%(1e9/unit)
	if frac < 0 {
		sec, frac = sec-1, frac+1e9/unit
	}
	t := time.Unix(sec, frac*unit).UTC()
	return strconv.AppendQuote(nil, t.Format(time.RFC3339Nano))
}

// float writes f as a JSON number, in the fewest digits that read back
// as the same value of its size; JSON has no NaN or infinities, so those
// are strings.
func float(f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return []byte(`"NaN"`)
	case math.IsInf(f, 1):
		return []byte(`"Infinity"`)
	case math.IsInf(f, -1):
		return []byte(`"-Infinity"`)
	}
	return strconv.AppendFloat(nil, f, 'g', -1, bits)
}

// unscaled is a decimal's unscaled value: an integer, or big-endian two's
// complement bytes.
func unscaled(kind pq.Kind, v pq.Value) *big.Int {
	switch kind {
	case pq.Int32:
		return big.NewInt(int64(v.Int32()))
	case pq.Int64:
		return big.NewInt(v.Int64())
	}
	b := v.ByteArray()
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b))*8))
	}
	return n
}

// decimal writes n scaled down by scale digits, all of them kept: 1250
// at scale 2 is "12.50", -5 at scale 3 "-0.005".
func decimal(n *big.Int, scale int) string {
	s := new(big.Int).Abs(n).String()
	sign := ""
	if n.Sign() < 0 {
		sign = "-"
	}
	if scale <= 0 {
		if n.Sign() != 0 {
			s += zeros(-scale)
		}
		return sign + s
	}
	if len(s) <= scale {
		s = zeros(scale-len(s)+1) + s
	}
	return sign + s[:len(s)-scale] + "." + s[len(s)-scale:]
}

func zeros(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}

// half converts an IEEE 754 half-precision float.
func half(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // infinities and NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0:
		if frac == 0 {
			return math.Float32frombits(sign)
		}
		f := float32(frac) / 1024 / 16384 // subnormal: frac × 2^-24
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}
