// Package fileio holds cgtune's file helpers: writes that never leave a
// file half-written and never replace one they should not
// (WriteFileAtomic, CreateFileAtomic, CheckWritable), reads that never
// hang on a FIFO or a device nor grow without end (ReadFileLimited,
// OpenFileLimited, Readable, LineReader), and the identity of a path
// (Target, SameFile). It uses the standard library only.
package fileio
