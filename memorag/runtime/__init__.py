"""The transformers glue under the memory model and the generators: the embedded models shipped
as packages (`embedded`), device placement (`placement`), the CPU dtype (`cpu_dtype`), the cache
argument of `forward` (`cache_argument`), stop tokens (`stop_tokens`), the one decode loop every local decoding runs (`decode_loop`), the supported
architectures (`architectures`), the attention kernels' caches (`kernel_caches`) and returning
freed memory to the system (`memtrim`). It imports no other package of `memorag` but `config`."""
