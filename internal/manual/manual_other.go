//go:build !unix

package manual

func osAlloc(int) []byte { return nil }

func osFree([]byte) {}
