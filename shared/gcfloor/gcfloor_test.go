package gcfloor

import (
	"runtime"
	"testing"
)

func TestSize(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want int
	}{
		{"default", nil, Size},
		{"GOGC set", map[string]string{"GOGC": "200"}, 0},
		{"GOGC off", map[string]string{"GOGC": "off"}, 0},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "512MiB"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := size(func(k string) string { return c.env[k] }); got != c.want {
				t.Fatalf("size = %d, want %d", got, c.want)
			}
		})
	}
}

// The floor raises the collector's goal: after Set, a collection leaves a
// heap goal of at least twice Size.
func TestSetRaisesGoal(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	Set()
	if Held() != Size {
		t.Fatalf("Held = %d, want %d", Held(), Size)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.NextGC < 2*Size {
		t.Fatalf("next collection at %d bytes, want at least %d", ms.NextGC, 2*Size)
	}
}
