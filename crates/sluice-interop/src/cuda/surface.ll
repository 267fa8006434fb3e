; sluice's copy kernels (see driver.rs, copy_into_surface). Regenerate surface.ptx with
;   llc -O2 -march=nvptx64 -mcpu=sm_75 surface.ll -o surface.ptx
; (LLVM 14 here); the driver JIT-compiles the PTX for the GPU it runs on.
;
; sluice_surface_{2d,3d}_{1,2,4,8,16} copy a block of texels of 1 to 16 bytes from pitched device
; memory into a surface (a CUDA array mapped onto a Vulkan image) with unformatted surface
; stores, one texel per thread: thread (x, y) of block z copies texel (x, y, z) from
; src + z * plane + y * row + x * texel to surface coordinates (x * texel bytes, y, z). They take
; (src, row, plane, width, height, depth, surface). Stores outside the surface trap, so a wrong
; size cannot write past the array.
;
; sluice_surface_wide_{2d,3d}_{1,2,4,8} do the same 16 bytes per thread: thread (c, y) of block z
; copies bytes [16c, 16c + 16) of row (y, z) with one 16-byte unformatted store (several texels),
; and where the row's last chunk is shorter, its texels one by one. Their 16-byte loads are four
; 32-bit loads: the source address and pitches must be whole 32-bit words.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.tid.y()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()

declare void @llvm.nvvm.sust.b.2d.i16.trap(i64, i32, i32, i16)
declare void @llvm.nvvm.sust.b.2d.i32.trap(i64, i32, i32, i32)
declare void @llvm.nvvm.sust.b.2d.i8.trap(i64, i32, i32, i16)
declare void @llvm.nvvm.sust.b.2d.v2i32.trap(i64, i32, i32, i32, i32)
declare void @llvm.nvvm.sust.b.2d.v4i32.trap(i64, i32, i32, i32, i32, i32, i32)
declare void @llvm.nvvm.sust.b.3d.i16.trap(i64, i32, i32, i32, i16)
declare void @llvm.nvvm.sust.b.3d.i32.trap(i64, i32, i32, i32, i32)
declare void @llvm.nvvm.sust.b.3d.i8.trap(i64, i32, i32, i32, i16)
declare void @llvm.nvvm.sust.b.3d.v2i32.trap(i64, i32, i32, i32, i32, i32)
declare void @llvm.nvvm.sust.b.3d.v4i32.trap(i64, i32, i32, i32, i32, i32, i32, i32)

define void @sluice_surface_2d_1(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
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
  %inx = icmp ult i32 %x, %width
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %x64 = zext i32 %x to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %xo = shl i64 %x64, 0
  %zy = add i64 %zo, %yo
  %off = add i64 %zy, %xo
  %p = getelementptr i8, i8 addrspace(1)* %src, i64 %off
  %xb = shl i32 %x, 0
  %pv = bitcast i8 addrspace(1)* %p to i8 addrspace(1)*
  %v = load i8, i8 addrspace(1)* %pv, align 1
  %s0 = zext i8 %v to i16
  call void @llvm.nvvm.sust.b.2d.i8.trap(i64 %surf, i32 %xb, i32 %y, i16 %s0)
  br label %done
done:
  ret void
}

define void @sluice_surface_2d_2(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
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
  %inx = icmp ult i32 %x, %width
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %x64 = zext i32 %x to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %xo = shl i64 %x64, 1
  %zy = add i64 %zo, %yo
  %off = add i64 %zy, %xo
  %p = getelementptr i8, i8 addrspace(1)* %src, i64 %off
  %xb = shl i32 %x, 1
  %pv = bitcast i8 addrspace(1)* %p to i16 addrspace(1)*
  %v = load i16, i16 addrspace(1)* %pv, align 2
  call void @llvm.nvvm.sust.b.2d.i16.trap(i64 %surf, i32 %xb, i32 %y, i16 %v)
  br label %done
done:
  ret void
}

define void @sluice_surface_2d_4(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
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
  %inx = icmp ult i32 %x, %width
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %x64 = zext i32 %x to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %xo = shl i64 %x64, 2
  %zy = add i64 %zo, %yo
  %off = add i64 %zy, %xo
  %p = getelementptr i8, i8 addrspace(1)* %src, i64 %off
  %xb = shl i32 %x, 2
  %pv = bitcast i8 addrspace(1)* %p to i32 addrspace(1)*
  %v = load i32, i32 addrspace(1)* %pv, align 4
  call void @llvm.nvvm.sust.b.2d.i32.trap(i64 %surf, i32 %xb, i32 %y, i32 %v)
  br label %done
done:
  ret void
}

define void @sluice_surface_2d_8(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
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
  %inx = icmp ult i32 %x, %width
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %x64 = zext i32 %x to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %xo = shl i64 %x64, 3
  %zy = add i64 %zo, %yo
  %off = add i64 %zy, %xo
  %p = getelementptr i8, i8 addrspace(1)* %src, i64 %off
  %xb = shl i32 %x, 3
  %pv = bitcast i8 addrspace(1)* %p to <2 x i32> addrspace(1)*
  %v = load <2 x i32>, <2 x i32> addrspace(1)* %pv, align 4
  %e0 = extractelement <2 x i32> %v, i32 0
  %e1 = extractelement <2 x i32> %v, i32 1
  call void @llvm.nvvm.sust.b.2d.v2i32.trap(i64 %surf, i32 %xb, i32 %y, i32 %e0, i32 %e1)
  br label %done
done:
  ret void
}

define void @sluice_surface_2d_16(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
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
  %inx = icmp ult i32 %x, %width
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %x64 = zext i32 %x to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %xo = shl i64 %x64, 4
  %zy = add i64 %zo, %yo
  %off = add i64 %zy, %xo
  %p = getelementptr i8, i8 addrspace(1)* %src, i64 %off
  %xb = shl i32 %x, 4
  %pv = bitcast i8 addrspace(1)* %p to <4 x i32> addrspace(1)*
  %v = load <4 x i32>, <4 x i32> addrspace(1)* %pv, align 4
  %e0 = extractelement <4 x i32> %v, i32 0
  %e1 = extractelement <4 x i32> %v, i32 1
  %e2 = extractelement <4 x i32> %v, i32 2
  %e3 = extractelement <4 x i32> %v, i32 3
  call void @llvm.nvvm.sust.b.2d.v4i32.trap(i64 %surf, i32 %xb, i32 %y, i32 %e0, i32 %e1, i32 %e2, i32 %e3)
  br label %done
done:
  ret void
}

define void @sluice_surface_3d_1(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
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
  %inx = icmp ult i32 %x, %width
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %x64 = zext i32 %x to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %xo = shl i64 %x64, 0
  %zy = add i64 %zo, %yo
  %off = add i64 %zy, %xo
  %p = getelementptr i8, i8 addrspace(1)* %src, i64 %off
  %xb = shl i32 %x, 0
  %pv = bitcast i8 addrspace(1)* %p to i8 addrspace(1)*
  %v = load i8, i8 addrspace(1)* %pv, align 1
  %s0 = zext i8 %v to i16
  call void @llvm.nvvm.sust.b.3d.i8.trap(i64 %surf, i32 %xb, i32 %y, i32 %z, i16 %s0)
  br label %done
done:
  ret void
}

define void @sluice_surface_3d_2(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
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
  %inx = icmp ult i32 %x, %width
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %x64 = zext i32 %x to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %xo = shl i64 %x64, 1
  %zy = add i64 %zo, %yo
  %off = add i64 %zy, %xo
  %p = getelementptr i8, i8 addrspace(1)* %src, i64 %off
  %xb = shl i32 %x, 1
  %pv = bitcast i8 addrspace(1)* %p to i16 addrspace(1)*
  %v = load i16, i16 addrspace(1)* %pv, align 2
  call void @llvm.nvvm.sust.b.3d.i16.trap(i64 %surf, i32 %xb, i32 %y, i32 %z, i16 %v)
  br label %done
done:
  ret void
}

define void @sluice_surface_3d_4(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
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
  %inx = icmp ult i32 %x, %width
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %x64 = zext i32 %x to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %xo = shl i64 %x64, 2
  %zy = add i64 %zo, %yo
  %off = add i64 %zy, %xo
  %p = getelementptr i8, i8 addrspace(1)* %src, i64 %off
  %xb = shl i32 %x, 2
  %pv = bitcast i8 addrspace(1)* %p to i32 addrspace(1)*
  %v = load i32, i32 addrspace(1)* %pv, align 4
  call void @llvm.nvvm.sust.b.3d.i32.trap(i64 %surf, i32 %xb, i32 %y, i32 %z, i32 %v)
  br label %done
done:
  ret void
}

define void @sluice_surface_3d_8(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
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
  %inx = icmp ult i32 %x, %width
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %x64 = zext i32 %x to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %xo = shl i64 %x64, 3
  %zy = add i64 %zo, %yo
  %off = add i64 %zy, %xo
  %p = getelementptr i8, i8 addrspace(1)* %src, i64 %off
  %xb = shl i32 %x, 3
  %pv = bitcast i8 addrspace(1)* %p to <2 x i32> addrspace(1)*
  %v = load <2 x i32>, <2 x i32> addrspace(1)* %pv, align 4
  %e0 = extractelement <2 x i32> %v, i32 0
  %e1 = extractelement <2 x i32> %v, i32 1
  call void @llvm.nvvm.sust.b.3d.v2i32.trap(i64 %surf, i32 %xb, i32 %y, i32 %z, i32 %e0, i32 %e1)
  br label %done
done:
  ret void
}

define void @sluice_surface_3d_16(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
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
  %inx = icmp ult i32 %x, %width
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %x64 = zext i32 %x to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %xo = shl i64 %x64, 4
  %zy = add i64 %zo, %yo
  %off = add i64 %zy, %xo
  %p = getelementptr i8, i8 addrspace(1)* %src, i64 %off
  %xb = shl i32 %x, 4
  %pv = bitcast i8 addrspace(1)* %p to <4 x i32> addrspace(1)*
  %v = load <4 x i32>, <4 x i32> addrspace(1)* %pv, align 4
  %e0 = extractelement <4 x i32> %v, i32 0
  %e1 = extractelement <4 x i32> %v, i32 1
  %e2 = extractelement <4 x i32> %v, i32 2
  %e3 = extractelement <4 x i32> %v, i32 3
  call void @llvm.nvvm.sust.b.3d.v4i32.trap(i64 %surf, i32 %xb, i32 %y, i32 %z, i32 %e0, i32 %e1, i32 %e2, i32 %e3)
  br label %done
done:
  ret void
}
define void @sluice_surface_wide_2d_1(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
entry:
  %tx = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ty = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %nx = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %ny = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
  %bx = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %by = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
  %z = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()
  %bxn = mul i32 %bx, %nx
  %c = add i32 %bxn, %tx
  %byn = mul i32 %by, %ny
  %y = add i32 %byn, %ty
  %wb = shl i32 %width, 0
  %xb = shl i32 %c, 4
  %inx = icmp ult i32 %xb, %wb
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %rowoff = add i64 %zo, %yo
  %rowp = getelementptr i8, i8 addrspace(1)* %src, i64 %rowoff
  %end = add i32 %xb, 16
  %whole = icmp ule i32 %end, %wb
  br i1 %whole, label %wide, label %tail
wide:
  %xb64 = zext i32 %xb to i64
  %p = getelementptr i8, i8 addrspace(1)* %rowp, i64 %xb64
  %pv = bitcast i8 addrspace(1)* %p to <4 x i32> addrspace(1)*
  %v = load <4 x i32>, <4 x i32> addrspace(1)* %pv, align 4
  %e0 = extractelement <4 x i32> %v, i32 0
  %e1 = extractelement <4 x i32> %v, i32 1
  %e2 = extractelement <4 x i32> %v, i32 2
  %e3 = extractelement <4 x i32> %v, i32 3
  call void @llvm.nvvm.sust.b.2d.v4i32.trap(i64 %surf, i32 %xb, i32 %y, i32 %e0, i32 %e1, i32 %e2, i32 %e3)
  br label %done
tail:
  br label %loop
loop:
  %b = phi i32 [ %xb, %tail ], [ %bn, %loop ]
  %b64 = zext i32 %b to i64
  %tp = getelementptr i8, i8 addrspace(1)* %rowp, i64 %b64
  %t = load i8, i8 addrspace(1)* %tp, align 1
  %tv = zext i8 %t to i16
  call void @llvm.nvvm.sust.b.2d.i8.trap(i64 %surf, i32 %b, i32 %y, i16 %tv)
  %bn = add i32 %b, 1
  %more = icmp ult i32 %bn, %wb
  br i1 %more, label %loop, label %done
done:
  ret void
}

define void @sluice_surface_wide_2d_2(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
entry:
  %tx = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ty = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %nx = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %ny = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
  %bx = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %by = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
  %z = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()
  %bxn = mul i32 %bx, %nx
  %c = add i32 %bxn, %tx
  %byn = mul i32 %by, %ny
  %y = add i32 %byn, %ty
  %wb = shl i32 %width, 1
  %xb = shl i32 %c, 4
  %inx = icmp ult i32 %xb, %wb
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %rowoff = add i64 %zo, %yo
  %rowp = getelementptr i8, i8 addrspace(1)* %src, i64 %rowoff
  %end = add i32 %xb, 16
  %whole = icmp ule i32 %end, %wb
  br i1 %whole, label %wide, label %tail
wide:
  %xb64 = zext i32 %xb to i64
  %p = getelementptr i8, i8 addrspace(1)* %rowp, i64 %xb64
  %pv = bitcast i8 addrspace(1)* %p to <4 x i32> addrspace(1)*
  %v = load <4 x i32>, <4 x i32> addrspace(1)* %pv, align 4
  %e0 = extractelement <4 x i32> %v, i32 0
  %e1 = extractelement <4 x i32> %v, i32 1
  %e2 = extractelement <4 x i32> %v, i32 2
  %e3 = extractelement <4 x i32> %v, i32 3
  call void @llvm.nvvm.sust.b.2d.v4i32.trap(i64 %surf, i32 %xb, i32 %y, i32 %e0, i32 %e1, i32 %e2, i32 %e3)
  br label %done
tail:
  br label %loop
loop:
  %b = phi i32 [ %xb, %tail ], [ %bn, %loop ]
  %b64 = zext i32 %b to i64
  %tp = getelementptr i8, i8 addrspace(1)* %rowp, i64 %b64
  %tq = bitcast i8 addrspace(1)* %tp to i16 addrspace(1)*
  %tv = load i16, i16 addrspace(1)* %tq, align 2
  call void @llvm.nvvm.sust.b.2d.i16.trap(i64 %surf, i32 %b, i32 %y, i16 %tv)
  %bn = add i32 %b, 2
  %more = icmp ult i32 %bn, %wb
  br i1 %more, label %loop, label %done
done:
  ret void
}

define void @sluice_surface_wide_2d_4(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
entry:
  %tx = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ty = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %nx = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %ny = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
  %bx = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %by = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
  %z = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()
  %bxn = mul i32 %bx, %nx
  %c = add i32 %bxn, %tx
  %byn = mul i32 %by, %ny
  %y = add i32 %byn, %ty
  %wb = shl i32 %width, 2
  %xb = shl i32 %c, 4
  %inx = icmp ult i32 %xb, %wb
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %rowoff = add i64 %zo, %yo
  %rowp = getelementptr i8, i8 addrspace(1)* %src, i64 %rowoff
  %end = add i32 %xb, 16
  %whole = icmp ule i32 %end, %wb
  br i1 %whole, label %wide, label %tail
wide:
  %xb64 = zext i32 %xb to i64
  %p = getelementptr i8, i8 addrspace(1)* %rowp, i64 %xb64
  %pv = bitcast i8 addrspace(1)* %p to <4 x i32> addrspace(1)*
  %v = load <4 x i32>, <4 x i32> addrspace(1)* %pv, align 4
  %e0 = extractelement <4 x i32> %v, i32 0
  %e1 = extractelement <4 x i32> %v, i32 1
  %e2 = extractelement <4 x i32> %v, i32 2
  %e3 = extractelement <4 x i32> %v, i32 3
  call void @llvm.nvvm.sust.b.2d.v4i32.trap(i64 %surf, i32 %xb, i32 %y, i32 %e0, i32 %e1, i32 %e2, i32 %e3)
  br label %done
tail:
  br label %loop
loop:
  %b = phi i32 [ %xb, %tail ], [ %bn, %loop ]
  %b64 = zext i32 %b to i64
  %tp = getelementptr i8, i8 addrspace(1)* %rowp, i64 %b64
  %tq = bitcast i8 addrspace(1)* %tp to i32 addrspace(1)*
  %tv = load i32, i32 addrspace(1)* %tq, align 4
  call void @llvm.nvvm.sust.b.2d.i32.trap(i64 %surf, i32 %b, i32 %y, i32 %tv)
  %bn = add i32 %b, 4
  %more = icmp ult i32 %bn, %wb
  br i1 %more, label %loop, label %done
done:
  ret void
}

define void @sluice_surface_wide_2d_8(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
entry:
  %tx = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ty = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %nx = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %ny = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
  %bx = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %by = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
  %z = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()
  %bxn = mul i32 %bx, %nx
  %c = add i32 %bxn, %tx
  %byn = mul i32 %by, %ny
  %y = add i32 %byn, %ty
  %wb = shl i32 %width, 3
  %xb = shl i32 %c, 4
  %inx = icmp ult i32 %xb, %wb
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %rowoff = add i64 %zo, %yo
  %rowp = getelementptr i8, i8 addrspace(1)* %src, i64 %rowoff
  %end = add i32 %xb, 16
  %whole = icmp ule i32 %end, %wb
  br i1 %whole, label %wide, label %tail
wide:
  %xb64 = zext i32 %xb to i64
  %p = getelementptr i8, i8 addrspace(1)* %rowp, i64 %xb64
  %pv = bitcast i8 addrspace(1)* %p to <4 x i32> addrspace(1)*
  %v = load <4 x i32>, <4 x i32> addrspace(1)* %pv, align 4
  %e0 = extractelement <4 x i32> %v, i32 0
  %e1 = extractelement <4 x i32> %v, i32 1
  %e2 = extractelement <4 x i32> %v, i32 2
  %e3 = extractelement <4 x i32> %v, i32 3
  call void @llvm.nvvm.sust.b.2d.v4i32.trap(i64 %surf, i32 %xb, i32 %y, i32 %e0, i32 %e1, i32 %e2, i32 %e3)
  br label %done
tail:
  br label %loop
loop:
  %b = phi i32 [ %xb, %tail ], [ %bn, %loop ]
  %b64 = zext i32 %b to i64
  %tp = getelementptr i8, i8 addrspace(1)* %rowp, i64 %b64
  %tq = bitcast i8 addrspace(1)* %tp to <2 x i32> addrspace(1)*
  %tw = load <2 x i32>, <2 x i32> addrspace(1)* %tq, align 4
  %t0 = extractelement <2 x i32> %tw, i32 0
  %t1 = extractelement <2 x i32> %tw, i32 1
  call void @llvm.nvvm.sust.b.2d.v2i32.trap(i64 %surf, i32 %b, i32 %y, i32 %t0, i32 %t1)
  %bn = add i32 %b, 8
  %more = icmp ult i32 %bn, %wb
  br i1 %more, label %loop, label %done
done:
  ret void
}

define void @sluice_surface_wide_3d_1(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
entry:
  %tx = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ty = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %nx = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %ny = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
  %bx = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %by = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
  %z = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()
  %bxn = mul i32 %bx, %nx
  %c = add i32 %bxn, %tx
  %byn = mul i32 %by, %ny
  %y = add i32 %byn, %ty
  %wb = shl i32 %width, 0
  %xb = shl i32 %c, 4
  %inx = icmp ult i32 %xb, %wb
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %rowoff = add i64 %zo, %yo
  %rowp = getelementptr i8, i8 addrspace(1)* %src, i64 %rowoff
  %end = add i32 %xb, 16
  %whole = icmp ule i32 %end, %wb
  br i1 %whole, label %wide, label %tail
wide:
  %xb64 = zext i32 %xb to i64
  %p = getelementptr i8, i8 addrspace(1)* %rowp, i64 %xb64
  %pv = bitcast i8 addrspace(1)* %p to <4 x i32> addrspace(1)*
  %v = load <4 x i32>, <4 x i32> addrspace(1)* %pv, align 4
  %e0 = extractelement <4 x i32> %v, i32 0
  %e1 = extractelement <4 x i32> %v, i32 1
  %e2 = extractelement <4 x i32> %v, i32 2
  %e3 = extractelement <4 x i32> %v, i32 3
  call void @llvm.nvvm.sust.b.3d.v4i32.trap(i64 %surf, i32 %xb, i32 %y, i32 %z, i32 %e0, i32 %e1, i32 %e2, i32 %e3)
  br label %done
tail:
  br label %loop
loop:
  %b = phi i32 [ %xb, %tail ], [ %bn, %loop ]
  %b64 = zext i32 %b to i64
  %tp = getelementptr i8, i8 addrspace(1)* %rowp, i64 %b64
  %t = load i8, i8 addrspace(1)* %tp, align 1
  %tv = zext i8 %t to i16
  call void @llvm.nvvm.sust.b.3d.i8.trap(i64 %surf, i32 %b, i32 %y, i32 %z, i16 %tv)
  %bn = add i32 %b, 1
  %more = icmp ult i32 %bn, %wb
  br i1 %more, label %loop, label %done
done:
  ret void
}

define void @sluice_surface_wide_3d_2(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
entry:
  %tx = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ty = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %nx = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %ny = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
  %bx = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %by = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
  %z = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()
  %bxn = mul i32 %bx, %nx
  %c = add i32 %bxn, %tx
  %byn = mul i32 %by, %ny
  %y = add i32 %byn, %ty
  %wb = shl i32 %width, 1
  %xb = shl i32 %c, 4
  %inx = icmp ult i32 %xb, %wb
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %rowoff = add i64 %zo, %yo
  %rowp = getelementptr i8, i8 addrspace(1)* %src, i64 %rowoff
  %end = add i32 %xb, 16
  %whole = icmp ule i32 %end, %wb
  br i1 %whole, label %wide, label %tail
wide:
  %xb64 = zext i32 %xb to i64
  %p = getelementptr i8, i8 addrspace(1)* %rowp, i64 %xb64
  %pv = bitcast i8 addrspace(1)* %p to <4 x i32> addrspace(1)*
  %v = load <4 x i32>, <4 x i32> addrspace(1)* %pv, align 4
  %e0 = extractelement <4 x i32> %v, i32 0
  %e1 = extractelement <4 x i32> %v, i32 1
  %e2 = extractelement <4 x i32> %v, i32 2
  %e3 = extractelement <4 x i32> %v, i32 3
  call void @llvm.nvvm.sust.b.3d.v4i32.trap(i64 %surf, i32 %xb, i32 %y, i32 %z, i32 %e0, i32 %e1, i32 %e2, i32 %e3)
  br label %done
tail:
  br label %loop
loop:
  %b = phi i32 [ %xb, %tail ], [ %bn, %loop ]
  %b64 = zext i32 %b to i64
  %tp = getelementptr i8, i8 addrspace(1)* %rowp, i64 %b64
  %tq = bitcast i8 addrspace(1)* %tp to i16 addrspace(1)*
  %tv = load i16, i16 addrspace(1)* %tq, align 2
  call void @llvm.nvvm.sust.b.3d.i16.trap(i64 %surf, i32 %b, i32 %y, i32 %z, i16 %tv)
  %bn = add i32 %b, 2
  %more = icmp ult i32 %bn, %wb
  br i1 %more, label %loop, label %done
done:
  ret void
}

define void @sluice_surface_wide_3d_4(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
entry:
  %tx = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ty = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %nx = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %ny = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
  %bx = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %by = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
  %z = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()
  %bxn = mul i32 %bx, %nx
  %c = add i32 %bxn, %tx
  %byn = mul i32 %by, %ny
  %y = add i32 %byn, %ty
  %wb = shl i32 %width, 2
  %xb = shl i32 %c, 4
  %inx = icmp ult i32 %xb, %wb
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %rowoff = add i64 %zo, %yo
  %rowp = getelementptr i8, i8 addrspace(1)* %src, i64 %rowoff
  %end = add i32 %xb, 16
  %whole = icmp ule i32 %end, %wb
  br i1 %whole, label %wide, label %tail
wide:
  %xb64 = zext i32 %xb to i64
  %p = getelementptr i8, i8 addrspace(1)* %rowp, i64 %xb64
  %pv = bitcast i8 addrspace(1)* %p to <4 x i32> addrspace(1)*
  %v = load <4 x i32>, <4 x i32> addrspace(1)* %pv, align 4
  %e0 = extractelement <4 x i32> %v, i32 0
  %e1 = extractelement <4 x i32> %v, i32 1
  %e2 = extractelement <4 x i32> %v, i32 2
  %e3 = extractelement <4 x i32> %v, i32 3
  call void @llvm.nvvm.sust.b.3d.v4i32.trap(i64 %surf, i32 %xb, i32 %y, i32 %z, i32 %e0, i32 %e1, i32 %e2, i32 %e3)
  br label %done
tail:
  br label %loop
loop:
  %b = phi i32 [ %xb, %tail ], [ %bn, %loop ]
  %b64 = zext i32 %b to i64
  %tp = getelementptr i8, i8 addrspace(1)* %rowp, i64 %b64
  %tq = bitcast i8 addrspace(1)* %tp to i32 addrspace(1)*
  %tv = load i32, i32 addrspace(1)* %tq, align 4
  call void @llvm.nvvm.sust.b.3d.i32.trap(i64 %surf, i32 %b, i32 %y, i32 %z, i32 %tv)
  %bn = add i32 %b, 4
  %more = icmp ult i32 %bn, %wb
  br i1 %more, label %loop, label %done
done:
  ret void
}

define void @sluice_surface_wide_3d_8(i8 addrspace(1)* %src, i64 %row, i64 %plane, i32 %width, i32 %height, i32 %depth, i64 %surf) {
entry:
  %tx = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ty = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %nx = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %ny = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
  %bx = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %by = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
  %z = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()
  %bxn = mul i32 %bx, %nx
  %c = add i32 %bxn, %tx
  %byn = mul i32 %by, %ny
  %y = add i32 %byn, %ty
  %wb = shl i32 %width, 3
  %xb = shl i32 %c, 4
  %inx = icmp ult i32 %xb, %wb
  %iny = icmp ult i32 %y, %height
  %inz = icmp ult i32 %z, %depth
  %inxy = and i1 %inx, %iny
  %in = and i1 %inxy, %inz
  br i1 %in, label %copy, label %done
copy:
  %z64 = zext i32 %z to i64
  %y64 = zext i32 %y to i64
  %zo = mul i64 %z64, %plane
  %yo = mul i64 %y64, %row
  %rowoff = add i64 %zo, %yo
  %rowp = getelementptr i8, i8 addrspace(1)* %src, i64 %rowoff
  %end = add i32 %xb, 16
  %whole = icmp ule i32 %end, %wb
  br i1 %whole, label %wide, label %tail
wide:
  %xb64 = zext i32 %xb to i64
  %p = getelementptr i8, i8 addrspace(1)* %rowp, i64 %xb64
  %pv = bitcast i8 addrspace(1)* %p to <4 x i32> addrspace(1)*
  %v = load <4 x i32>, <4 x i32> addrspace(1)* %pv, align 4
  %e0 = extractelement <4 x i32> %v, i32 0
  %e1 = extractelement <4 x i32> %v, i32 1
  %e2 = extractelement <4 x i32> %v, i32 2
  %e3 = extractelement <4 x i32> %v, i32 3
  call void @llvm.nvvm.sust.b.3d.v4i32.trap(i64 %surf, i32 %xb, i32 %y, i32 %z, i32 %e0, i32 %e1, i32 %e2, i32 %e3)
  br label %done
tail:
  br label %loop
loop:
  %b = phi i32 [ %xb, %tail ], [ %bn, %loop ]
  %b64 = zext i32 %b to i64
  %tp = getelementptr i8, i8 addrspace(1)* %rowp, i64 %b64
  %tq = bitcast i8 addrspace(1)* %tp to <2 x i32> addrspace(1)*
  %tw = load <2 x i32>, <2 x i32> addrspace(1)* %tq, align 4
  %t0 = extractelement <2 x i32> %tw, i32 0
  %t1 = extractelement <2 x i32> %tw, i32 1
  call void @llvm.nvvm.sust.b.3d.v2i32.trap(i64 %surf, i32 %b, i32 %y, i32 %z, i32 %t0, i32 %t1)
  %bn = add i32 %b, 8
  %more = icmp ult i32 %bn, %wb
  br i1 %more, label %loop, label %done
done:
  ret void
}

!nvvm.annotations = !{!0, !1, !2, !3, !4, !5, !6, !7, !8, !9, !10, !11, !12, !13, !14, !15, !16, !17}
!0 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_2d_1, !"kernel", i32 1}
!1 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_2d_2, !"kernel", i32 1}
!2 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_2d_4, !"kernel", i32 1}
!3 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_2d_8, !"kernel", i32 1}
!4 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_2d_16, !"kernel", i32 1}
!5 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_3d_1, !"kernel", i32 1}
!6 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_3d_2, !"kernel", i32 1}
!7 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_3d_4, !"kernel", i32 1}
!8 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_3d_8, !"kernel", i32 1}
!9 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_3d_16, !"kernel", i32 1}
!10 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_wide_2d_1, !"kernel", i32 1}
!11 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_wide_2d_2, !"kernel", i32 1}
!12 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_wide_2d_4, !"kernel", i32 1}
!13 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_wide_2d_8, !"kernel", i32 1}
!14 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_wide_3d_1, !"kernel", i32 1}
!15 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_wide_3d_2, !"kernel", i32 1}
!16 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_wide_3d_4, !"kernel", i32 1}
!17 = !{void (i8 addrspace(1)*, i64, i64, i32, i32, i32, i64)* @sluice_surface_wide_3d_8, !"kernel", i32 1}
