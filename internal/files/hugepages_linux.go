package files

import "syscall"

// adviseHugePages asks Linux to back b with transparent huge pages where it can (where
// transparent_hugepage is "madvise", as it often is, it does so only when asked). A
// large input read into fresh memory otherwise takes one page fault per 4 KiB as read(2)
// fills it — 13,000 for a 51 MB manifest — and on a virtual machine each costs several
// microseconds. It is advice: memory it cannot get stays as it was, and an error is
// ignored.
func adviseHugePages(b []byte) {
	if cap(b) >= hugeRead {
		_ = syscall.Madvise(b[:cap(b)], syscall.MADV_HUGEPAGE)
	}
}
