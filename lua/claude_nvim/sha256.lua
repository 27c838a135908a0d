-- SHA-256 (FIPS 180-4) in LuaJIT's bit operations, for the project key
-- (claude_nvim.project): Neovim's sha256() tests itself on its first call, hashing a million
-- bytes (6-7 ms, on the way to claude's start); this hashes a path in ~0.01 ms.
local bit = require('bit')
local band, bnot, bxor, ror, rshift, tobit = bit.band, bit.bnot, bit.bxor, bit.ror, bit.rshift,
  bit.tobit

-- The first 32 bits of the fractional parts of the cube roots of the first 64 primes.
local K = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}

-- `n` as `bytes` big-endian bytes.
local function big_endian(n, bytes)
  local out = {}
  for i = bytes, 1, -1 do
    out[i] = string.char(n % 256)
    n = math.floor(n / 256)
  end
  return table.concat(out)
end

--- The SHA-256 of `data`, as 64 lowercase hex digits (as Neovim's sha256() and Python's
--- hashlib give it).
---@param data string
---@return string
return function(data)
  local padded = data .. '\128' .. ('\0'):rep((55 - #data) % 64) .. big_endian(#data * 8, 8)
  local h = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
              0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 }
  local w = {}
  for at = 1, #padded, 64 do
    for i = 1, 16 do
      local b1, b2, b3, b4 = padded:byte(at + 4 * i - 4, at + 4 * i - 1)
      w[i] = tobit(((b1 * 256 + b2) * 256 + b3) * 256 + b4)
    end
    for i = 17, 64 do
      local x, y = w[i - 15], w[i - 2]
      w[i] = tobit(w[i - 16] + bxor(ror(x, 7), ror(x, 18), rshift(x, 3)) + w[i - 7]
        + bxor(ror(y, 17), ror(y, 19), rshift(y, 10)))
    end
    local a, b, c, d, e, f, g, hh = unpack(h)
    for i = 1, 64 do
      local t1 = hh + bxor(ror(e, 6), ror(e, 11), ror(e, 25)) + bxor(band(e, f), band(bnot(e), g))
        + K[i] + w[i]
      local t2 = bxor(ror(a, 2), ror(a, 13), ror(a, 22)) + bxor(band(a, b), band(a, c), band(b, c))
      a, b, c, d, e, f, g, hh = tobit(t1 + t2), a, b, c, tobit(d + t1), e, f, g
    end
    for i, v in ipairs({ a, b, c, d, e, f, g, hh }) do h[i] = tobit(h[i] + v) end
  end
  for i = 1, 8 do h[i] = bit.tohex(h[i], 8) end
  return table.concat(h)
end
