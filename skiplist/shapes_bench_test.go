package skiplist

import (
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"testing"
)

// Key shapes users have (see bench.KeyShape): searches decide most steps
// with the first 8 key bytes, so shapes whose keys share them cost more.
var benchShapes = []struct {
	name string
	key  func(buf []byte, v uint64) []byte // v < 1<<20; user key only
}{
	{"dbbench", func(buf []byte, v uint64) []byte {
		buf = binary.BigEndian.AppendUint64(buf[:0], v)
		return append(buf, "00000000"...)
	}},
	{"decimal", func(buf []byte, v uint64) []byte {
		buf = append(buf[:0], "0000000000000000"...)
		for i := 15; v > 0; i-- {
			buf[i] = byte('0' + v%10)
			v /= 10
		}
		return buf
	}},
	{"prefixed", func(buf []byte, v uint64) []byte {
		buf = append(buf[:0], "/tbl/0053/1/"...)
		return binary.BigEndian.AppendUint64(buf, v)
	}},
	{"hashed", func(buf []byte, v uint64) []byte {
		buf = append(buf[:0], 'h')
		for i := uint64(0); i < 4; i++ {
			buf = binary.BigEndian.AppendUint64(buf, mix64(v*4+i))
		}
		return buf
	}},
	{"varlen", func(buf []byte, v uint64) []byte {
		fields := [...]string{"a", "name", "email", "last_login_at", "profile_picture_url"}
		buf = append(buf[:0], "user:"...)
		buf = strconv.AppendUint(buf, v, 10)
		buf = append(buf, ':')
		return append(buf, fields[mix64(v)%uint64(len(fields))]...)
	}},
}

// maxShapeKey is the longest user key of benchShapes (hashed: 33 bytes).
const maxShapeKey = 40

func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func internalKey(buf, ukey []byte) []byte {
	buf = append(buf[:0], ukey...)
	return binary.LittleEndian.AppendUint64(buf, 1<<8|1)
}

// BenchmarkInsertShapes inserts keys of each shape in random order into a
// list of 256K entries (a fresh one each 256K inserts, outside the timer).
func BenchmarkInsertShapes(b *testing.B) {
	value := make([]byte, benchValue)
	const perList = 1 << 18
	for _, sh := range benchShapes {
		b.Run(sh.name, func(b *testing.B) {
			l := newListFor(b, perList, maxShapeKey, false)
			rng := rand.New(rand.NewPCG(1, 2))
			var ubuf, kbuf []byte
			n := 0
			for b.Loop() {
				if n == perList {
					b.StopTimer()
					l = newListFor(b, perList, maxShapeKey, false)
					n = 0
					b.StartTimer()
				}
				ubuf = sh.key(ubuf, rng.Uint64()%(1<<20))
				kbuf = internalKey(kbuf, ubuf)
				if err := l.Add(kbuf, value); err != nil && err != ErrRecordExists {
					b.Fatal(err)
				}
				n++
			}
		})
	}
}

// BenchmarkGetShapes seeks random present keys of each shape in a list of
// 256K of them.
func BenchmarkGetShapes(b *testing.B) {
	value := make([]byte, benchValue)
	const entries = 1 << 18
	for _, sh := range benchShapes {
		b.Run(sh.name, func(b *testing.B) {
			l := newListFor(b, entries, maxShapeKey, false)
			rng := rand.New(rand.NewPCG(3, 4))
			var ubuf, kbuf []byte
			vs := make([]uint64, 0, entries)
			for len(vs) < entries {
				v := rng.Uint64() % (1 << 20)
				ubuf = sh.key(ubuf, v)
				kbuf = internalKey(kbuf, ubuf)
				if l.Add(kbuf, value) == nil {
					vs = append(vs, v)
				}
			}
			it := l.NewIter(false)
			for b.Loop() {
				ubuf = sh.key(ubuf, vs[rng.IntN(len(vs))])
				if !it.SeekGESplit(ubuf, ^uint64(0)) {
					b.Fatal("miss")
				}
			}
		})
	}
}
