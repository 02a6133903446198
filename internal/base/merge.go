package base

// NonNil returns b, or an empty slice for nil: a merge operator tells "no
// value" (nil) from an empty one, so an empty value read back as nil must
// not reach it as nil.
func NonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Clip caps b's capacity at its length, so that a merge operator
// appending to its argument copies instead of writing past it into the
// buffer it aliases (a block, an arena, an accumulated result).
func Clip(b []byte) []byte {
	if b == nil {
		return nil
	}
	return b[:len(b):len(b)]
}
