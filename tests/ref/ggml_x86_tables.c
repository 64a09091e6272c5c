/* Lookup tables that ggml-cpu/arch/x86/quants.c's MXFP4/NVFP4 dot products
 * name and ggml-cpu.c defines; the activation quantizers the test library is
 * built for never read them, so they stay zero. */
float ggml_table_f32_ue4m3[1 << 8];
float ggml_table_f32_e8m0_half[1 << 8];
