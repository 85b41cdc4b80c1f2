package schemas

import (
	"math"
	"strconv"
	"testing"
)

// FuzzExactFloat: where exactFloat answers, it answers ParseFloat's value,
// bit for bit.
func FuzzExactFloat(f *testing.F) {
	for _, s := range []string{"0", "0.1", "2.5", "1E2", "9.99e22", "1e23", "0.3e-22", "123456789.012345",
		"1234567890.123456", "0.000000000000001", "1e-400", "1e00001", "5e-324", "9007199254740993"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc := fastScan{data: []byte(s)}
		tok, ok := sc.number()
		if !ok || sc.i != len(s) || tok[0] == '-' {
			return
		}
		got, ok := exactFloat(tok)
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(string(tok), 64)
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("%q: exactFloat %v, ParseFloat %v (%v)", s, got, want, err)
		}
	})
}
