"""A small program with a clear profile: a pure-Python loop, a native call, a sleep."""
import hashlib
import time
import zlib


def python_work(n):
    total = 0
    for i in range(n):  # pure Python: the interpreter's time
        total += i * i
    return total


def native_work(data):
    digest = hashlib.sha256(data).hexdigest()  # native code: OpenSSL
    packed = zlib.compress(data, 6)  # native code: zlib
    return digest, len(packed)


def waiting():
    time.sleep(0.05)  # off CPU


def main():
    data = bytes(range(256)) * 4096
    end = time.time() + 3.0
    while time.time() < end:
        python_work(200000)
        native_work(data)
        waiting()


if __name__ == "__main__":
    main()
