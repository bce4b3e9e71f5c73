"""The job's trainer, one module per revision: v1 is the one the job has run with, v2 its
revision that counts the samples it has seen and can report each micro-batch's progress."""
