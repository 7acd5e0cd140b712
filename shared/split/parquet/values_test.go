package parquet

import (
	"math"
	"math/big"
	"testing"
)

func TestDecimalKeepsScale(t *testing.T) {
	for _, c := range []struct {
		n     int64
		scale int
		want  string
	}{
		{1250, 2, "12.50"}, {-5, 3, "-0.005"}, {0, 4, "0.0000"}, {7, 0, "7"},
		{-120, 2, "-1.20"}, {12, -2, "1200"}, {0, -2, "0"},
	} {
		if got := decimal(big.NewInt(c.n), c.scale); got != c.want {
			t.Errorf("decimal(%d, %d) = %q, want %q", c.n, c.scale, got, c.want)
		}
	}
}

func TestTimestampBeforeEpoch(t *testing.T) {
	for _, c := range []struct {
		n, unit int64
		want    string
	}{
		{-1, 1e3, `"1969-12-31T23:59:59.999999Z"`},
		{1500, 1e6, `"1970-01-01T00:00:01.5Z"`},
		{0, 1, `"1970-01-01T00:00:00Z"`},
	} {
		if got := string(timestamp(c.n, c.unit)); got != c.want {
			t.Errorf("timestamp(%d, %d) = %s, want %s", c.n, c.unit, got, c.want)
		}
	}
}

func TestFloatsJSONCannotHold(t *testing.T) {
	for f, want := range map[float64]string{math.NaN(): `"NaN"`, math.Inf(1): `"Infinity"`, math.Inf(-1): `"-Infinity"`, 1.5: "1.5"} {
		if got := string(float(f, 64)); got != want {
			t.Errorf("float(%v) = %s, want %s", f, got, want)
		}
	}
	if got := string(float(float64(float32(0.1)), 32)); got != "0.1" {
		t.Errorf("a float32 0.1 is written %s", got)
	}
}

func TestHalf(t *testing.T) {
	for h, want := range map[uint16]float32{0x3c00: 1, 0xc000: -2, 0x0001: 5.9604645e-08, 0x7bff: 65504, 0x3555: 0.33325195} {
		if got := half(h); got != want {
			t.Errorf("half(%#x) = %v, want %v", h, got, want)
		}
	}
	if !math.IsInf(float64(half(0x7c00)), 1) {
		t.Error("half(0x7c00) is not +Inf")
	}
}
