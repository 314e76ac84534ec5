// Package integration runs nodeclass against the localaws emulator through the
// real SDK clients; it is apart so unit tests build without the emulator.
package integration
