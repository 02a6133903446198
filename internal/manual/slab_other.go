//go:build !unix && !windows

package manual

func mapMem(n int) ([]byte, bool) { return make([]byte, n), false }

func unmapMem([]byte) {}

func protectMem([]byte, bool) {}

func dontNeed([]byte) {}

func freeLarge(b []byte) {
	if invariantsEnabled {
		for i := range b {
			b[i] = Poison
		}
	}
}
