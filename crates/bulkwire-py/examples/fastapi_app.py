import bulkwire
from fastapi import FastAPI, File, Form, UploadFile

bulkwire.install()  # python-multipart's parser is now bulkwire's, for Starlette and FastAPI

app = FastAPI()


@app.post("/upload")
async def upload(title: str = Form(), file: UploadFile = File()) -> dict:
    size = len(await file.read())
    return {"title": title, "filename": file.filename, "size": size}
