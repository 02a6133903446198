// Package base holds the pieces every layer of Vigil shares: the internal key
// encoding (user key ‖ 8-byte trailer), key kinds, sequence numbers, the error
// sentinels, and helpers that build corruption errors naming what and where.
//
// It imports nothing of Vigil's, so every other package may depend on it.
package base
