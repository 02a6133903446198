package vigil_test

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"log"
	"os"

	"github.com/vigildb/vigil"
)

// A custom key order with prefixes: keys are a 4-byte sensor id followed
// by an 8-byte big-endian timestamp, and a sensor's readings sort newest
// first. Split makes the sensor id the prefix, so the tables' bloom
// filters hold sensor ids and a scan of one sensor (IterOptions.Prefix)
// skips the tables without it.
func ExampleOptions_comparer() {
	dir, err := os.MkdirTemp("", "vigil-comparer")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	const idLen = 4
	newestFirst := &vigil.Comparer{
		Compare: func(a, b []byte) int {
			if c := bytes.Compare(a[:min(idLen, len(a))], b[:min(idLen, len(b))]); c != 0 {
				return c // sensors in id order
			}
			ta, tb := a[min(idLen, len(a)):], b[min(idLen, len(b)):]
			if len(ta) == 0 || len(tb) == 0 {
				return cmp.Compare(len(ta), len(tb)) // the bare id first, as Split requires
			}
			return bytes.Compare(tb, ta) // newest first
		},
		Split: func(k []byte) int { return min(idLen, len(k)) },
		Name:  "example.SensorNewestFirst", // recorded: the DB opens only with this comparer
	}
	db, err := vigil.Open(dir, &vigil.Options{Comparer: newestFirst})
	if err != nil {
		log.Fatal(err)
	}
	key := func(sensor string, ts uint64) []byte { return binary.BigEndian.AppendUint64([]byte(sensor), ts) }
	for ts := uint64(1); ts <= 3; ts++ {
		for _, s := range []string{"s001", "s002"} {
			if err := db.Put(key(s, ts), fmt.Appendf(nil, "%s@%d", s, ts), nil); err != nil {
				log.Fatal(err)
			}
		}
	}
	if err := db.Flush(); err != nil {
		log.Fatal(err)
	}
	it, err := db.NewIter(&vigil.IterOptions{Prefix: []byte("s002")})
	if err != nil {
		log.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
		fmt.Println(string(it.Value()))
	}
	if err := it.Close(); err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	_, err = vigil.Open(dir, nil) // the default, bytewise order
	fmt.Println(err != nil)
	// Output:
	// s002@3
	// s002@2
	// s002@1
	// true
}
