package reccount

import (
	"encoding/csv"
	"strings"
	"testing"
)

// FuzzCSVRecordCount: the counter agrees with encoding/csv on any valid
// CSV.
func FuzzCSVRecordCount(f *testing.F) {
	f.Add("a,b\n1,\"x\ny\"\n\r\n2,z")
	f.Add("\r\r\n\"\"\n")
	f.Fuzz(func(t *testing.T, in string) {
		recs, err := csv.NewReader(strings.NewReader(in)).ReadAll()
		if err != nil {
			t.Skip()
		}
		var c csvCounter
		c.count([]byte(in))
		if c.records() != int64(len(recs)) {
			t.Fatalf("%q: counted %d records, csv.Reader read %d", in, c.records(), len(recs))
		}
	})
}
