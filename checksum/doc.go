// Package checksum implements the checksum types Vigil can guard its bytes
// with: the 32-bit block-trailer checksum RocksDB stores after every block and
// WAL record, a full-width 64-bit form for per-key-value protection and
// whole-file checksums, the per-file context modifier that makes a block read
// from the wrong offset fail its check, and a fast CRC-64 (Jones) with
// Combine.
//
// A Type's zero value is Default, which means XXH3, so that an unset option
// never means "no checksum". The number stored in a file footer or WAL header
// and given to a --checksum_type flag is Type.Code: RocksDB's numbering
// (None=0 … XXH3=4) plus CRC64=5, so the flag means the same in vigil kvbench
// and db_bench and a stored number is stable forever; TypeFromCode reads it
// back. Every algorithm is pinned by golden values in golden_test.go;
// changing any of them is a format change.
//
// The package imports nothing of Vigil's and is safe for concurrent use: all
// functions are pure, tables are built once (at init, or on first use behind
// a sync.Once), and nothing on a checksum path allocates.
//
// # CRC-64/Jones, and how it is made fast
//
// UpdateCRC64 is bit-for-bit the CRC Redis and Valkey put in RDB files
// (reflected polynomial 0x95ac9329ac4bc9b5, init 0, no final xor). The
// obvious table loop retires one byte per table lookup, each lookup waiting
// for the previous one: about 0.5 bytes per cycle. Go's hash/crc64 does
// slicing-by-8 for its built-in polynomials, but for any other table it
// rebuilds an 8 × 256 table on every call of 2 KiB or more and falls back to
// bytewise below that. Three things make this package's CRC fast:
//
// Carry-less multiplication (amd64). A CRC is the remainder of the message,
// read as a polynomial over GF(2), modulo P. Remainders can be computed
// piecewise: a 128-bit chunk X followed by D more bits contributes X·x^D, and
// X·x^D ≡ X_hi·(x^(D+64) mod P) + X_lo·(x^D mod P), two 64×64 carry-less
// multiplies whose 128-bit sum is "folded" onto the chunk D bits later. The
// PCLMULQDQ instruction does such a multiply in a few cycles, so the loop
// keeps four 128-bit accumulators 64 bytes apart (D = 512) and folds 64
// bytes per iteration with eight independent multiplies; at the end the four
// are folded onto one, the last 128 bits are reduced to 64 with one more
// multiply and a Barrett reduction (two multiplies by precomputed
// floor(x^128/P) and P), and a tail under 16 bytes goes through the table.
// In the reflected bit order a CRC uses, a carry-less product comes out
// multiplied by an extra x, so every folding constant is x^(e-1) rather than
// x^e. All constants are derived from the polynomial at init; the assembly
// is selected at init when CPUID reports PCLMULQDQ and SSE4.1, via a small
// CPUID stub of our own. Inputs under 16 bytes take the table path, where
// the call and reduction would cost more than they save.
//
// Independent lanes (everywhere else, and the build tag purego). Slicing-by-8
// turns 8 bytes into 8 table lookups that do not depend on each other, but
// consecutive 8-byte steps still form one dependency chain. So the pure-Go
// path runs three CRCs over three consecutive 256-byte blocks in one loop,
// keeping the CPU's load units busy with three chains at once, and merges
// them with CRC(a‖b‖c) = shift(CRC(a), 512 B) ⊕ shift(CRC(b), 256 B) ⊕ CRC(c).
// A shift over a fixed number of zero bytes is a linear map on 64 bits, so
// each is eight lookups in a table built once (on first use).
//
// Combine in constant time. Because the CRC is linear,
// CRC(A‖B) = CRC(A)·x^(8·|B|) ⊕ CRC(B) mod P. CombineCRC64 gets x^(8·|B|)
// from a table indexed by the hexadecimal digits of |B| (16 positions × 15
// digits, fold-constant pairs, built once): one fold per non-zero digit, then
// one Barrett reduction, so its cost does not depend on |B|'s magnitude. The
// same algebra in pure Go (a nibble-at-a-time GF(2) multiply) is the fallback.
//
// The tests run the assembly and the pure-Go path side by side on every
// length 0..2000 at random alignments, against hash/crc64 and a bitwise
// reference, and check a software emulation of the folding algorithm with
// the same constants, so the math is verified on every platform.
//
// CRC64 as a checksum Type (Block, Value, Sum64, KV) uses the inverted form
// ^UpdateCRC64(^0, data) — what hash/crc64 computes with the Jones table —
// because the init-0 form is 0 for every all-zero input, which would let a
// zeroed block with a zeroed trailer pass. CombineCRC64 works for both forms.
package checksum
