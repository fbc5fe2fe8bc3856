"""Stage `layout`: the grid shapes the kernel (retiling, splitting, launch order), then
every tile gets a distribution over threads or a place in shared memory."""
