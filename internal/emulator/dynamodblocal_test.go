package emulator

import (
	"slices"
	"testing"
)

// The bench measures DynamoDB Local at its peak; everything else runs it
// lean (leanJVM).
func TestDynamoLocalArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		peak bool
		want []string // before the class path
	}{
		{name: "lean by default", peak: false, want: []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.library.path=/lib"}},
		{name: "peak for the bench", peak: true, want: []string{"-Djava.library.path=/lib"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := dynamoLocalArgs("/lib", 8000, tc.peak)
			if len(args) < len(tc.want) || !slices.Equal(args[:len(tc.want)], tc.want) {
				t.Fatalf("args %q, want them to start %q", args, tc.want)
			}
			if tail := args[len(args)-2:]; tail[0] != "-port" || tail[1] != "8000" {
				t.Fatalf("args %q end %q, want -port 8000", args, tail)
			}
		})
	}
}
