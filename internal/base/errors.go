package base

import (
	"encoding/hex"
	"errors"
	"fmt"
)

// Error sentinels. The root package re-exports them; callers test with errors.Is.
var (
	// ErrCorruption marks any error caused by bytes that failed a checksum,
	// an order check, or a bounds check while decoding.
	ErrCorruption = errors.New("vigil: corruption")
	// ErrInvalidArgument marks a caller error: bad options, bad flags, bad ranges.
	ErrInvalidArgument = errors.New("vigil: invalid argument")
	// ErrNotFound is returned by Get when the key has no live value.
	ErrNotFound = errors.New("vigil: not found")
	// ErrClosed is returned by every operation on a closed DB, iterator or snapshot.
	ErrClosed = errors.New("vigil: closed")
	// ErrReadOnly is returned by writes after a background error stopped the DB
	// from accepting writes, or when the DB was opened read-only.
	ErrReadOnly = errors.New("vigil: read-only")
	// ErrConflict is returned by a transaction's commit when a key or range
	// it read was written after its snapshot: retry the transaction.
	ErrConflict = errors.New("vigil: transaction conflict")
)

// CorruptionErrorf returns an error that wraps ErrCorruption with the formatted
// message. The format may itself use %w to wrap a cause.
func CorruptionErrorf(format string, args ...any) error {
	return &markedError{mark: ErrCorruption, err: fmt.Errorf(format, args...)}
}

// InvalidArgumentErrorf returns an error that wraps ErrInvalidArgument.
func InvalidArgumentErrorf(format string, args ...any) error {
	return &markedError{mark: ErrInvalidArgument, err: fmt.Errorf(format, args...)}
}

// MarkCorruption wraps err so that errors.Is(err, ErrCorruption) holds. It
// returns nil for nil and err itself if it is already marked.
func MarkCorruption(err error) error {
	if err == nil || errors.Is(err, ErrCorruption) {
		return err
	}
	return &markedError{mark: ErrCorruption, err: err}
}

// MarkInvalidArgument wraps err so that errors.Is(err, ErrInvalidArgument) holds.
func MarkInvalidArgument(err error) error {
	if err == nil || errors.Is(err, ErrInvalidArgument) {
		return err
	}
	return &markedError{mark: ErrInvalidArgument, err: err}
}

// IsCorruption reports whether err is (or wraps) a corruption error.
func IsCorruption(err error) bool { return errors.Is(err, ErrCorruption) }

// markedError carries a sentinel mark without putting the sentinel's text in
// the message a second time; the message reads "vigil: corruption: <detail>".
type markedError struct {
	mark error
	err  error
}

func (e *markedError) Error() string { return e.mark.Error() + ": " + e.err.Error() }

// Unwrap exposes both the mark and the cause to errors.Is / errors.As.
func (e *markedError) Unwrap() []error { return []error{e.mark, e.err} }

// MaxHexKey is how many bytes of a key an error message shows before it
// truncates; keys can be large and error messages end up in logs.
const MaxHexKey = 32

// HexKey renders up to MaxHexKey bytes of b in hex, marking truncation with
// "..." and the full length, for error messages.
func HexKey(b []byte) string {
	if len(b) <= MaxHexKey {
		return hex.EncodeToString(b)
	}
	return fmt.Sprintf("%s...(%d bytes)", hex.EncodeToString(b[:MaxHexKey]), len(b))
}
