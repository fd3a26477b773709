// Package shard owns a shard's life on a Slurm submit host: its stage, allocation, steps and
// cleanup (execute, finalize, recover), and the local runner's.
//
// It owns a shard's life on a Slurm submit host (docs/compat-spec.md §3.5–§3.8, §6, §9,
// §11): the stage on shared storage, the allocation, the steps run on it, and the cleanup
// that always follows — cancel the allocation and confirm it is gone, collect every result
// row, remove the stage — idempotently, from execute, finalize or recover.
//
// The files: slurm.go is the Slurm client (squeue, scancel, job states, allocation ids and
// the execution's token); stage.go the stage's base and its checks; steps.go the steps of
// an execution as typed values; execute.go runs them (dryrun.go prints them), local.go on
// the local runner; cleanup.go and finalize.go end an execution, from execute, finalize,
// recover or resume.
package shard
