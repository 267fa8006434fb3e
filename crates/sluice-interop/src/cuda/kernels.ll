; sluice's pattern kernels (see kernels.rs). Regenerate kernels.ptx with
;   opt -O2 kernels.ll -S | llc -O2 -march=nvptx64 -mcpu=sm_75 -o kernels.ptx
; (LLVM 14 here). The driver JIT-compiles the PTX for the GPU it runs on; sm_75 is the oldest
; target CUDA 13 keeps.
; Both take (dst, row_pitch, plane_pitch, width, height, depth, frame) and write the sample at
; (x, y, z) = (thread in x, thread in y, block in z), at dst + z * plane_pitch + y * row_pitch + x * 4.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.tid.y()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()

; The byte offset of sample (x, y, z), or -1 outside the volume.
define internal i64 @sample_offset(i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i32* %xo, i32* %yo, i32* %zo) alwaysinline {
entry:
  %tx = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ty = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %nx = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %ny = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
  %bx = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %by = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
  %z = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()
  %bxn = mul i32 %bx, %nx
  %x = add i32 %bxn, %tx
  %byn = mul i32 %by, %ny
  %y = add i32 %byn, %ty
  store i32 %x, i32* %xo
  store i32 %y, i32* %yo
  store i32 %z, i32* %zo
  %inx = icmp ult i32 %x, %width
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %inside, label %outside
inside:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %x64 = zext i32 %x to i64
  %zo64 = mul i64 %z64, %plane
  %yo64 = mul i64 %y64, %row
  %xo64 = shl i64 %x64, 2
  %zy = add i64 %zo64, %yo64
  %off = add i64 %zy, %xo64
  ret i64 %off
outside:
  ret i64 -1
}

; RGBA8: r = (x + frame) & 255, g = (y + 2 frame) & 255, b = (x ^ y ^ z) & 255, a = 255.
define void @sluice_fill_rgba8(i8 addrspace(1)* %dst, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i32 %frame) {
entry:
  %xp = alloca i32
  %yp = alloca i32
  %zp = alloca i32
  %off = call i64 @sample_offset(i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i32* %xp, i32* %yp, i32* %zp)
  %outside = icmp eq i64 %off, -1
  br i1 %outside, label %done, label %write
write:
  %x = load i32, i32* %xp
  %y = load i32, i32* %yp
  %z = load i32, i32* %zp
  %r0 = add i32 %x, %frame
  %r = and i32 %r0, 255
  %f2 = shl i32 %frame, 1
  %g0 = add i32 %y, %f2
  %g1 = and i32 %g0, 255
  %g = shl i32 %g1, 8
  %b0 = xor i32 %x, %y
  %b1 = xor i32 %b0, %z
  %b2 = and i32 %b1, 255
  %b = shl i32 %b2, 16
  %rg = or i32 %r, %g
  %rgb = or i32 %rg, %b
  %rgba = or i32 %rgb, -16777216
  %p = getelementptr i8, i8 addrspace(1)* %dst, i64 %off
  %p32 = bitcast i8 addrspace(1)* %p to i32 addrspace(1)*
  store i32 %rgba, i32 addrspace(1)* %p32, align 4
  br label %done
done:
  ret void
}

; f32: ((x + 2 y + 3 z + frame) & 255) / 256.
define void @sluice_fill_f32(i8 addrspace(1)* %dst, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i32 %frame) {
entry:
  %xp = alloca i32
  %yp = alloca i32
  %zp = alloca i32
  %off = call i64 @sample_offset(i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i32* %xp, i32* %yp, i32* %zp)
  %outside = icmp eq i64 %off, -1
  br i1 %outside, label %done, label %write
write:
  %x = load i32, i32* %xp
  %y = load i32, i32* %yp
  %z = load i32, i32* %zp
  %y2 = shl i32 %y, 1
  %z3 = mul i32 %z, 3
  %s0 = add i32 %x, %y2
  %s1 = add i32 %s0, %z3
  %s2 = add i32 %s1, %frame
  %s = and i32 %s2, 255
  %sf = uitofp i32 %s to float
  %v = fmul float %sf, 0x3F70000000000000
  %p = getelementptr i8, i8 addrspace(1)* %dst, i64 %off
  %pf = bitcast i8 addrspace(1)* %p to float addrspace(1)*
  store float %v, float addrspace(1)* %pf, align 4
  br label %done
done:
  ret void
}

; Mesh positions (f32x3) of vertex i = block x * ntid x + thread x, for i < count: triangle
; t = i / 3, corner c = i % 3, in cell (col, row) = (t % side, t / side) of `cell` units,
; shifted right by frame % cell; corner 0 at the cell's origin, 1 one cell right, 2 one cell
; down; z = 1 + (t & 7). Takes (dst, count, side, cell, frame); side and cell are nonzero.
define void @sluice_mesh_positions(float addrspace(1)* %dst, i32 %count, i32 %side, i32 %cell, i32 %frame) {
entry:
  %tx = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %nx = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %bx = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %bxn = mul i32 %bx, %nx
  %i = add i32 %bxn, %tx
  %in = icmp ult i32 %i, %count
  br i1 %in, label %write, label %done
write:
  %t = udiv i32 %i, 3
  %c = urem i32 %i, 3
  %col = urem i32 %t, %side
  %row = udiv i32 %t, %side
  %shift = urem i32 %frame, %cell
  %x0 = mul i32 %col, %cell
  %x1 = add i32 %x0, %shift
  %is1 = icmp eq i32 %c, 1
  %dx = select i1 %is1, i32 %cell, i32 0
  %x = add i32 %x1, %dx
  %y0 = mul i32 %row, %cell
  %is2 = icmp eq i32 %c, 2
  %dy = select i1 %is2, i32 %cell, i32 0
  %y = add i32 %y0, %dy
  %t7 = and i32 %t, 7
  %z = add i32 %t7, 1
  %xf = uitofp i32 %x to float
  %yf = uitofp i32 %y to float
  %zf = uitofp i32 %z to float
  %i64 = zext i32 %i to i64
  %b0 = mul i64 %i64, 3
  %px = getelementptr float, float addrspace(1)* %dst, i64 %b0
  store float %xf, float addrspace(1)* %px, align 4
  %b1 = add i64 %b0, 1
  %py = getelementptr float, float addrspace(1)* %dst, i64 %b1
  store float %yf, float addrspace(1)* %py, align 4
  %b2 = add i64 %b0, 2
  %pz = getelementptr float, float addrspace(1)* %dst, i64 %b2
  store float %zf, float addrspace(1)* %pz, align 4
  br label %done
done:
  ret void
}

!nvvm.annotations = !{!0, !1, !2}
!0 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i32)* @sluice_fill_rgba8, !"kernel", i32 1}
!1 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i32)* @sluice_fill_f32, !"kernel", i32 1}
!2 = !{void (float addrspace(1)*, i32, i32, i32, i32)* @sluice_mesh_positions, !"kernel", i32 1}
