package scheduling

// bitset is a fixed-size set of small integers (instance-type positions).
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func fullBitset(n int) bitset {
	b := newBitset(n)
	for i := 0; i < n; i++ {
		b.set(i)
	}
	return b
}

func (b bitset) set(i int)         { b[i>>6] |= 1 << (uint(i) & 63) }
func (b bitset) clear(i int)       { b[i>>6] &^= 1 << (uint(i) & 63) }
func (b bitset) has(i int) bool    { return b[i>>6]&(1<<(uint(i)&63)) != 0 }
func (b bitset) copyFrom(o bitset) { copy(b, o) }

func (b bitset) empty() bool {
	for _, w := range b {
		if w != 0 {
			return false
		}
	}
	return true
}

// and stores a AND o into b (b may alias a).
func (b bitset) and(a, o bitset) {
	for i := range b {
		b[i] = a[i] & o[i]
	}
}

// subsetOf reports whether every element of b is in o.
func (b bitset) subsetOf(o bitset) bool {
	for i, w := range b {
		if w&^o[i] != 0 {
			return false
		}
	}
	return true
}

// mask helpers for zones (at most 64) and capacity types.
func maskHas(m uint64, i int) bool { return m&(1<<uint(i)) != 0 }

func maskEach(m uint64, f func(int)) {
	for m != 0 {
		t := trailing(m)
		f(t)
		m &= m - 1
	}
}
