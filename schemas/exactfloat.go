package schemas

// exactFloat converts a JSON number to the float64 strconv.ParseFloat
// returns, when that takes one exact operation: at most 15 significant
// digits (so the mantissa is exact) and a power of ten up to 1e22 (exact
// too), multiplied or divided once, which IEEE arithmetic rounds
// correctly. Otherwise it returns false, and the caller uses ParseFloat,
// whose frames (a 800-byte decimal) would grow the goroutine's stack.
func exactFloat(tok []byte) (float64, bool) {
	var m uint64
	digits, exp, i := 0, 0, 0
	for ; i < len(tok) && isDigit(tok[i]); i++ {
		m, digits = m*10+uint64(tok[i]-'0'), digits+1
	}
	if i < len(tok) && tok[i] == '.' {
		for i++; i < len(tok) && isDigit(tok[i]); i++ {
			m, digits, exp = m*10+uint64(tok[i]-'0'), digits+1, exp-1
		}
	}
	if digits == 0 || digits > 15 {
		return 0, false
	}
	if i < len(tok) {
		e, ok := exponent(tok[i:])
		if !ok {
			return 0, false
		}
		exp += e
	}
	f := float64(m)
	switch {
	case exp >= 0 && exp < len(exactPow10):
		return f * exactPow10[exp], true
	case exp < 0 && -exp < len(exactPow10):
		return f / exactPow10[-exp], true
	}
	return 0, false
}

// exponent reads [eE][+-]?[0-9]+, giving up beyond 4 digits.
func exponent(b []byte) (int, bool) {
	if len(b) < 2 || b[0] != 'e' && b[0] != 'E' {
		return 0, false
	}
	b = b[1:]
	neg := b[0] == '-'
	if b[0] == '-' || b[0] == '+' {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 4 {
		return 0, false
	}
	e := 0
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		e = e*10 + int(c-'0')
	}
	if neg {
		e = -e
	}
	return e, true
}

var exactPow10 = [...]float64{
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
}
