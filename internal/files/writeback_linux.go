package files

import "golang.org/x/sys/unix"

// startWriteback asks the kernel to begin writing a range of the file to disk, without
// waiting for it (sync_file_range SYNC_FILE_RANGE_WRITE). It is only a hint; errors are
// ignored, as the write itself reports what matters.
func startWriteback(fd uintptr, off, n int64) {
	_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
